//! Tool schemas for Gemini: JSON Schema cut down to the OpenAPI 3.0 subset its `Schema` reads,
//! with local `$ref`s inlined.

use serde_json::{json, Map, Value};

/// The keys of Gemini's `Schema` (an OpenAPI 3.0 subset); everything else (`additionalProperties`,
/// `$schema`, `$ref`, ...) is refused by the API and is dropped.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// How deep `$ref`s are followed when inlined; a deeper (or recursive) one becomes an
/// unconstrained object, which Gemini accepts and the tool's server still checks.
pub(super) const MAX_REF_DEPTH: usize = 8;

/// `schema` with every local `$ref` (`#/$defs/NAME`, `#/definitions/NAME`) replaced by its
/// definition, since Gemini's schema has no references; `oneOf` becomes `anyOf` and `const`
/// a one-value `enum`, which say the same in the subset Gemini reads.
pub fn inline_refs(schema: &Value) -> Value {
    let defs = |key: &str| schema.get(key).and_then(Value::as_object);
    let definitions: Map<String, Value> = defs("$defs")
        .into_iter()
        .chain(defs("definitions"))
        .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    inline_at(schema, &definitions, 0)
}

fn inline_at(schema: &Value, definitions: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        let name = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"));
        return match name.and_then(|n| definitions.get(n)) {
            Some(target) if depth < MAX_REF_DEPTH => inline_at(target, definitions, depth + 1),
            _ => json!({"type": "object"}),
        };
    }
    let each = |list: &Value| match list {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| inline_at(item, definitions, depth))
                .collect(),
        ),
        other => other.clone(),
    };
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "$defs" | "definitions" => {}
            // Names of properties map to schemas: a property may be called `const`.
            "properties" => {
                let properties = match value {
                    Value::Object(props) => Value::Object(
                        props
                            .iter()
                            .map(|(k, v)| (k.clone(), inline_at(v, definitions, depth)))
                            .collect(),
                    ),
                    other => other.clone(),
                };
                out.insert(key.clone(), properties);
            }
            "items" => {
                out.insert(key.clone(), inline_at(value, definitions, depth));
            }
            "anyOf" | "oneOf" => {
                out.insert("anyOf".into(), each(value));
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![value.clone()]));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// A JSON Schema cut down to what Gemini accepts. A `type` list such as `["string", "null"]`
/// becomes the first non-null type plus `nullable: true`.
pub fn gemini_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        if !SCHEMA_KEYS.contains(&key.as_str()) {
            continue;
        }
        let value = match key.as_str() {
            "properties" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(k, v)| (k.clone(), gemini_schema(v)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" => gemini_schema(value),
            "anyOf" => match value {
                Value::Array(list) => Value::Array(list.iter().map(gemini_schema).collect()),
                other => other.clone(),
            },
            "type" => match value {
                Value::Array(types) => {
                    if types.iter().any(|t| t == "null") {
                        out.insert("nullable".into(), json!(true));
                    }
                    types
                        .iter()
                        .find(|t| *t != "null")
                        .cloned()
                        .unwrap_or_else(|| json!("string"))
                }
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}
