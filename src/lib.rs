//! lotsync keeps a dealership's vehicles on the Vehicle Inventory Service in step with what its
//! dealer management system (DMS) exports.
//!
//! The pipeline runs one way, one module per stage:
//!
//! ```text
//! inbox/ ─notify─▶ feed reader ─records─▶ mapper ─payloads─▶ diff ─ops─▶ outbox ─▶ uploader ─HTTP─▶ service
//! timer ─▶ reconcile: service list ─▶ compare with state ─ops─▶ outbox
//! ```
//!
//! - [`api`]: the typed client of the service, with [`api::ApiError`] classing every failure as
//!   retryable, rejected or fatal.
//! - `sandbox`: a strict, fault-injecting imitation of the service on loopback, for tests, the
//!   demo and integrators; behind the `sandbox` cargo feature (on by default; the .deb leaves
//!   it and axum out).
//! - [`feed`]: streaming CSV and XML readers of DMS exports, yielding records.
//! - [`mapper`]: a record to a spec §4.2 payload through a profile, with warnings or a rejection.
//! - [`state`]: what the service holds as far as lotsync knows, in one SQLite file.
//! - [`diff`]: one file's payloads against the state become operations, behind a safety guard.
//! - [`plan`]: a plan and its operations ([`plan::Op`]), the types the diff and the
//!   reconciliation make, the outbox commits and the uploader sends.
//! - [`outbox`]: the durable queue of operations, committed before anything is sent.
//! - [`upload`]: drains the outbox through the client: adaptive rate, retries, answers
//!   recorded, notifications of incidents.
//! - [`reconcile`]: the service's whole list against the state and the archived exports, and
//!   the repairs queued (nightly, and `lotsync reconcile`).
//! - [`inbox`]: a feed's folders (arrivals, processing, archive, held, failed) and the report
//!   filed beside each file.
//! - [`daemon`]: `lotsync run`: watchers, a file's way through the pipeline, the control
//!   socket, status and metrics.
//! - [`config`]: lotsync's config file.
//! - [`outcome`]: how a command's work ended, which the binary maps to its exit code.
//! - [`text`]: names and values from outside, escaped for logs and reports.
//!
//! The binary (`lotsync --help`, `src/main.rs` and `src/cli/`) wires these together; the library
//! has no command line, no `anyhow`, no progress bars.
#![warn(clippy::unwrap_used)]

pub mod api;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod diff;
pub mod feed;
pub mod inbox;
pub mod mapper;
pub mod outbox;
pub mod outcome;
pub mod plan;
pub mod reconcile;
#[cfg(feature = "sandbox")]
pub mod sandbox;
pub mod state;
pub mod text;
pub mod upload;

#[cfg(test)]
mod testing;
