//! Skills in the format users already have (`SKILL.md` with YAML front matter `name` and
//! `description`): found in `<root>/.tandem/skills/`, `<root>/.agents/skills/`,
//! `<root>/.claude/skills/` and `~/.config/tandem/skills/`; listed (name and description only)
//! in the system prompt; loaded by the `skill` tool, which returns the body and the skill's
//! files, or one of those files (read-only, even outside the workspace roots).
//!
//! Invariants: every read goes through a `cap_std` handle of the skills folder it was found in,
//! so a link inside a skill cannot lead out of that folder; the listing is sorted and depends
//! only on the files, so the system prompt stays byte-identical across turns (prompt caches
//! hold) until a skill changes.
//! Does not: run anything a skill says (the model reads it and acts through the other tools).

use std::io::Read;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// How many skills are listed; the rest are left out (and the listing says so).
pub const MAX_SKILLS: usize = 100;
/// The largest `SKILL.md`, or skill file the tool returns, in bytes.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// How many of a skill's files the tool lists.
const MAX_LISTED_FILES: usize = 200;

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The skills folder it was found in, and its own folder's name there.
    folder: PathBuf,
    dir_name: String,
}

/// Where skills are looked for, in order (a name found earlier wins).
pub fn skill_folders(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for root in roots {
        for sub in [".tandem/skills", ".agents/skills", ".claude/skills"] {
            folders.push(root.join(sub));
        }
    }
    if let Some(config) = dirs::config_dir() {
        folders.push(config.join("tandem").join("skills"));
    }
    folders
}

/// Every skill of `folders`, sorted by name, at most [`MAX_SKILLS`]. Blocking.
pub fn discover(folders: &[PathBuf]) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for folder in folders {
        let Ok(dir) = Dir::open_ambient_dir(folder, ambient_authority()) else {
            continue;
        };
        let Ok(entries) = dir.entries() else { continue };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for dir_name in names {
            let Some(text) = read_text(&dir, &Path::new(&dir_name).join("SKILL.md")) else {
                continue;
            };
            let (front, _) = split_front_matter(&text);
            let name = front_value(front, "name").unwrap_or_else(|| dir_name.clone());
            let Some(description) = front_value(front, "description") else {
                continue;
            };
            if name.chars().count() > MAX_NAME_CHARS || skills.iter().any(|s| s.name == name) {
                continue;
            }
            skills.push(Skill {
                name,
                description: description.chars().take(MAX_DESCRIPTION_CHARS).collect(),
                folder: folder.clone(),
                dir_name,
            });
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills.truncate(MAX_SKILLS);
    skills
}

/// The system prompt's section listing the skills (empty without skills).
pub fn prompt_section(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n\n<skills>\nSkills hold instructions for particular tasks. When a task matches one, call the `skill` tool with its name first and follow what it says.\n",
    );
    for skill in skills {
        out.push_str(&format!(
            "- {}: {}\n",
            skill.name,
            one_line(&skill.description)
        ));
    }
    out.push_str("</skills>");
    out
}

/// The `skill` tool: the body of skill `name` with its files, or one of its files. Blocking.
pub fn run(folders: &[PathBuf], name: &str, file: Option<&str>) -> Result<String, String> {
    let skills = discover(folders);
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "there is no skill `{name}`; the skills are: {}",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    };
    let root = Dir::open_ambient_dir(&skill.folder, ambient_authority())
        .and_then(|d| d.open_dir(&skill.dir_name))
        .map_err(|e| format!("the folder of skill `{name}` cannot be opened: {e}"))?;
    if let Some(file) = file {
        return read_text(&root, Path::new(file)).ok_or_else(|| {
            format!("`{file}` is not a text file of skill `{name}` (at most 256 KiB); call skill without `file` for its list of files")
        });
    }
    let text = read_text(&root, Path::new("SKILL.md"))
        .ok_or_else(|| format!("the SKILL.md of skill `{name}` cannot be read"))?;
    let (_, body) = split_front_matter(&text);
    let mut files = Vec::new();
    list_files(&root, Path::new(""), &mut files, 0);
    files.retain(|f| f != "SKILL.md");
    let location = skill.folder.join(&skill.dir_name);
    let mut out = format!(
        "# Skill `{name}` ({})\n\n{}",
        location.display(),
        body.trim()
    );
    if !files.is_empty() {
        out.push_str(&format!(
            "\n\nFiles of this skill (read one with skill {{\"name\": \"{name}\", \"file\": PATH}}):\n"
        ));
        for f in &files {
            out.push_str(&format!("- {f}\n"));
        }
    }
    Ok(out)
}

fn list_files(dir: &Dir, prefix: &Path, out: &mut Vec<String>, depth: usize) {
    if depth > 4 || out.len() >= MAX_LISTED_FILES {
        return;
    }
    let Ok(entries) = dir.entries() else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= MAX_LISTED_FILES {
            return;
        }
        let name = entry.file_name();
        let path = prefix.join(&name);
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                if let Ok(sub) = entry.open_dir() {
                    list_files(&sub, &path, out, depth + 1);
                }
            }
            Ok(t) if t.is_file() => out.push(path.to_string_lossy().into_owned()),
            _ => {}
        }
    }
}

/// A UTF-8 file of at most [`MAX_SKILL_FILE_BYTES`] beneath `dir`.
fn read_text(dir: &Dir, path: &Path) -> Option<String> {
    let meta = dir.metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SKILL_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    dir.open(path)
        .ok()?
        .take(MAX_SKILL_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The YAML front matter between `---` lines at the start, and the rest.
pub(crate) fn split_front_matter(text: &str) -> (&str, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return ("", text);
    };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            let after = after.split_once('\n').map_or("", |(_, body)| body);
            (&rest[..end], after)
        }
        None => ("", text),
    }
}

/// A top-level `key: value` of front matter (quotes stripped; a `>` or `|` block joins its
/// indented lines).
pub(crate) fn front_value(front: &str, key: &str) -> Option<String> {
    let mut lines = front.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(value) = line.strip_prefix(key).and_then(|v| v.strip_prefix(':')) else {
            continue;
        };
        let value = value.trim();
        if value == ">" || value == "|" || value == ">-" || value == "|-" {
            let mut block = Vec::new();
            while let Some(next) = lines.peek() {
                if next.starts_with(' ') || next.starts_with('\t') {
                    block.push(next.trim());
                    lines.next();
                } else {
                    break;
                }
            }
            let joined = block.join(" ");
            return (!joined.is_empty()).then_some(joined);
        }
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        return (!unquoted.is_empty()).then(|| unquoted.to_owned());
    }
    None
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_of_the_common_shapes() {
        let text =
            "---\nname: pdf\ndescription: \"Fill PDF forms\"\nlicense: MIT\n---\n# Body\nDo it.\n";
        let (front, body) = split_front_matter(text);
        assert_eq!(front_value(front, "name").as_deref(), Some("pdf"));
        assert_eq!(
            front_value(front, "description").as_deref(),
            Some("Fill PDF forms")
        );
        assert_eq!(body, "# Body\nDo it.\n");
        let folded = "---\nname: x\ndescription: >\n  one\n  two\n---\nb";
        let (front, _) = split_front_matter(folded);
        assert_eq!(
            front_value(front, "description").as_deref(),
            Some("one two")
        );
        assert_eq!(split_front_matter("no front matter").0, "");
    }

    #[test]
    fn discovery_prefers_the_project_and_reads_stay_in_the_skill() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let write = |p: &str, t: &str| {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        };
        write(
            ".claude/skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: PDFs\n---\nUse forms.py\n",
        );
        write(".claude/skills/pdf/forms.py", "print('x')\n");
        write(
            ".agents/skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: the other one\n---\nno\n",
        );
        write(
            ".tandem/skills/nodesc/SKILL.md",
            "---\nname: nodesc\n---\nno description\n",
        );
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        let folders: Vec<PathBuf> = [".tandem/skills", ".agents/skills", ".claude/skills"]
            .iter()
            .map(|f| root.join(f))
            .collect();
        let skills = discover(&folders);
        assert_eq!(skills.len(), 1, "{skills:?}");
        assert_eq!(skills[0].description, "the other one");
        let body = run(&folders[2..], "pdf", None).unwrap();
        assert!(
            body.contains("Use forms.py") && body.contains("- forms.py"),
            "{body}"
        );
        assert_eq!(
            run(&folders[2..], "pdf", Some("forms.py")).unwrap(),
            "print('x')\n"
        );
        let escape = run(&folders[2..], "pdf", Some("../../../secret.txt")).unwrap_err();
        assert!(escape.contains("not a text file of skill"), "{escape}");
        assert!(prompt_section(&skills).contains("- pdf: the other one"));
        assert_eq!(prompt_section(&[]), "");
    }
}
