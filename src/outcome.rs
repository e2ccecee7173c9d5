//! How a command's work ended ([`CommandOutcome`]): what the library and the daemon's answers
//! say, and what the binary alone turns into the process's exit code. It owns the kinds of
//! ending, not their numbers (`src/cli/`) nor the reasons (the messages beside them).

use serde::{Deserialize, Serialize};

/// How a command's work ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandOutcome {
    /// Done: everything was delivered (or nothing was asked).
    #[default]
    Done,
    /// Done, but not all of it: records or operations rejected, a file held or superseded,
    /// operations still queued.
    Incomplete,
    /// Not done: bad input or config, a refused state, or a fatal answer from the service.
    Failed,
    /// Asked about something nothing matches (`lotsync why` of an unknown car), as grep's 1.
    NotFound,
}
