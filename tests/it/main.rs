//! The integration tests, one binary: each file of tests/it/ is a module of it, and
//! tests/common is built once for all. `cargo test --test it NAME::` runs one file.
//! Kept apart in tests/, each its own process: crash_outbox.rs (its crash child is its
//! binary started again with --ignored), token_redaction.rs (it installs the global
//! tracing subscriber) and answer_memory.rs (it reads the whole process's peak memory).

#[path = "../common/mod.rs"]
mod common;

mod advice;
mod api_contract;
mod check_golden;
mod check_malformed;
mod daemon_cli;
mod daemon_edges;
mod daemon_memory;
mod dealership;
mod delivery_edges;
mod demo_cli;
mod diff_rules;
mod docs_links;
mod error_chain;
mod evidence_cli;
mod fidelity;
mod file_order;
mod grafana_dashboard;
mod logging_cli;
mod metrics_cli;
mod metrics_format;
mod operator_edges;
mod outbox_organizations;
mod ownership_cli;
mod pace_edges;
mod plan_cli;
mod planning_while_delivering;
mod protect_cli;
mod protect_property;
mod protect_rules;
mod reconcile_cli;
mod reconcile_pace;
mod run_dirs;
mod sandbox_cli;
mod state_edges;
mod sync_cli;
mod trust_edges;
mod two_bursts_cli;
mod upload_ids;
mod why_cli;
mod wrong_answers;
