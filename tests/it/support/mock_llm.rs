//! The integration tests' mock LLM: the workspace's one mock, `crates/mock-llm`
//! (`tandem_mock_llm`), re-exported so test modules keep importing it from `crate::support`.
//!
//! The same crate serves the benchmarks (`examples/bench/mock.rs`) and, through its
//! `tandem-mock-llm` binary, the editor suites. Its docs describe the scripts, dialects, gates
//! and control endpoints.

pub use tandem_mock_llm::*;
