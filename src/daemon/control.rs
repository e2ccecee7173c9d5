//! The control socket: a Unix socket in the runtime dir through which `lotsync status`,
//! `reconcile`, `release` and `why` reach the running daemon. One JSON line asks, one JSON line
//! answers. It owns the wire and the socket file, not what the answers say (the daemon).

use super::status::DaemonStatus;
use crate::outcome::CommandOutcome;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A question to the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Request {
    Status,
    Reconcile {
        #[serde(default)]
        rebuild: bool,
    },
    Release {
        file: PathBuf,
        #[serde(default)]
        feed: Option<String>,
        /// Even when it is older than a snapshot applied since.
        #[serde(default)]
        force: bool,
    },
    /// `lotsync why`: a car's story, by VIN or stock number.
    Why {
        query: String,
        #[serde(default)]
        feed: Option<String>,
    },
}

/// The daemon's answer: how the asked work ended (the command's exit code is the binary's
/// to choose), text for a person, and the data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireReply")]
pub struct Reply {
    pub outcome: CommandOutcome,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<DaemonStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
}

impl Reply {
    /// The asked work failed, and why.
    pub fn failed(text: impl Into<String>) -> Reply {
        Reply {
            outcome: CommandOutcome::Failed,
            text: text.into(),
            ..Reply::default()
        }
    }
}

/// An answer as read: a daemon started before the outcome was on the wire (one still running
/// after an upgrade) sends `exit` instead, the command's exit code of its time.
#[derive(Deserialize)]
struct WireReply {
    #[serde(default)]
    outcome: Option<CommandOutcome>,
    #[serde(default)]
    exit: Option<u8>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    status: Option<DaemonStatus>,
    #[serde(default)]
    report: Option<serde_json::Value>,
}

impl TryFrom<WireReply> for Reply {
    type Error = &'static str;

    fn try_from(wire: WireReply) -> Result<Reply, Self::Error> {
        let outcome = match (wire.outcome, wire.exit) {
            (Some(outcome), _) => outcome,
            // Those daemons' codes: 0 done, 3 done with refusals or queued, 2 failed.
            (None, Some(0)) => CommandOutcome::Done,
            (None, Some(3)) => CommandOutcome::Incomplete,
            (None, Some(_)) => CommandOutcome::Failed,
            (None, None) => return Err("an answer without an outcome"),
        };
        Ok(Reply {
            outcome,
            text: wire.text,
            status: wire.status,
            report: wire.report,
        })
    }
}

/// The socket cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {path}: another lotsync daemon is answering there")]
    AlreadyRunning { path: PathBuf },
    #[error("control socket {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {path}: the daemon's answer is not understood: {reason}")]
    Garbled { path: PathBuf, reason: String },
    #[error(
        "control socket {path}: a file that is not a socket is there; lotsync leaves it \
         alone (is daemon.socket the path you meant?)"
    )]
    NotASocket { path: PathBuf },
}

/// Whether `path` itself (not what a link points to) is a Unix socket.
pub(crate) fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ControlError {
    let path = path.to_owned();
    move |source| ControlError::Io { path, source }
}

/// Binds the socket, removing a stale one a crashed daemon left (but never one that answers,
/// nor a file that is no socket). Readable and writable by the daemon's user and group.
pub fn bind(path: &Path) -> Result<tokio::net::UnixListener, ControlError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ControlError::AlreadyRunning {
                path: path.to_owned(),
            });
        }
        if !is_socket(path) {
            return Err(ControlError::NotASocket {
                path: path.to_owned(),
            });
        }
        std::fs::remove_file(path).map_err(io_error(path))?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(io_error(path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io_error(path))?;
    Ok(listener)
}

/// Asks the daemon listening at `path`; `None` when no daemon listens there. `timeout`
/// bounds the wait for the answer (a reconciliation takes as long as it takes: `None`).
pub fn ask(
    path: &Path,
    request: &Request,
    timeout: Option<Duration>,
) -> Result<Option<Reply>, ControlError> {
    // With the daemon's listen queue full, the connect waits for a place: the daemon drops
    // silent connections within a second, so the queue moves.
    let mut stream = match std::os::unix::net::UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(io_error(path)(e)),
    };
    stream.set_read_timeout(timeout).map_err(io_error(path))?;
    let mut line = serde_json::to_vec(request).map_err(|e| ControlError::Garbled {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    line.push(b'\n');
    stream.write_all(&line).map_err(io_error(path))?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .map_err(io_error(path))?;
    serde_json::from_str(&answer)
        .map(Some)
        .map_err(|e| ControlError::Garbled {
            path: path.to_owned(),
            reason: e.to_string(),
        })
}

/// How long a connection may stay silent before its request: a client writes its one line as
/// soon as it connects (it is waiting in the socket when the daemon accepts), and an idle
/// connection holds one of the daemon's few control slots.
pub const REQUEST_WAIT: Duration = Duration::from_secs(1);

/// How long writing an answer may take: a client that never reads it does not keep its slot.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Reads one request from a connection; writes the answer `answer` gives.
pub async fn converse<F, Fut>(stream: tokio::net::UnixStream, answer: F) -> std::io::Result<()>
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    // A request is a short line; more than this is not a request.
    let mut read = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(read, 64 * 1024));
    tokio::time::timeout(REQUEST_WAIT, read.read_line(&mut line))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request"))??;
    if line.is_empty() {
        // Closed without asking (another daemon checking whether this one answers).
        return Ok(());
    }
    let reply = match serde_json::from_str::<Request>(&line) {
        Ok(request) => answer(request).await,
        Err(e) => Reply::failed(format!("not a request: {e}")),
    };
    let mut out = serde_json::to_vec(&reply).map_err(std::io::Error::other)?;
    out.push(b'\n');
    tokio::time::timeout(ANSWER_WAIT, async {
        write.write_all(&out).await?;
        write.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "answer not read"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_gets_its_answer_and_a_stale_socket_is_replaced() {
        let tmp = crate::testing::temp_dir("daemon");
        let dir = tmp.path().to_owned();
        let path = dir.join("run/lotsync.sock");
        assert_eq!(ask(&path, &Request::Status, None).unwrap(), None);
        let listener = bind(&path).unwrap();
        assert!(matches!(
            bind(&path),
            Err(ControlError::AlreadyRunning { .. })
        ));
        let server = tokio::spawn(async move {
            // The first connection is the second bind's check, which asks nothing.
            for _ in 0..2 {
                let (stream, _) = listener.accept().await.unwrap();
                converse(stream, |request| async move {
                    Reply {
                        text: format!("{request:?}"),
                        ..Reply::default()
                    }
                })
                .await
                .unwrap();
            }
        });
        let asked = path.clone();
        let reply = tokio::task::spawn_blocking(move || {
            ask(
                &asked,
                &Request::Release {
                    file: "x.csv".into(),
                    feed: None,
                    force: false,
                },
                Some(Duration::from_secs(5)),
            )
        })
        .await
        .unwrap()
        .unwrap()
        .unwrap();
        assert!(reply.text.starts_with("Release"), "{reply:?}");
        server.await.unwrap();
        // The listener is gone; the socket file stays, as after a crash: bound again.
        drop(bind(&path).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An answer carries how the work ended, by name; an answer of a daemon started before
    /// that (its `exit` code: 0, 2 or 3) is still read as the same outcome.
    #[test]
    fn an_answer_carries_its_outcome_and_an_older_daemons_exit_is_read() {
        let reply = Reply {
            outcome: CommandOutcome::Incomplete,
            text: "2 refused".into(),
            ..Reply::default()
        };
        let wire = serde_json::to_string(&reply).unwrap();
        assert_eq!(wire, r#"{"outcome":"incomplete","text":"2 refused"}"#);
        assert_eq!(serde_json::from_str::<Reply>(&wire).unwrap(), reply);
        for (exit, outcome) in [
            (0, CommandOutcome::Done),
            (3, CommandOutcome::Incomplete),
            (2, CommandOutcome::Failed),
        ] {
            let older: Reply =
                serde_json::from_str(&format!(r#"{{"exit":{exit},"text":"t"}}"#)).unwrap();
            assert_eq!(older.outcome, outcome, "exit {exit}");
            assert_eq!(older.text, "t");
        }
        assert!(serde_json::from_str::<Reply>(r#"{"text":"t"}"#).is_err());
    }

    /// A config naming a file that is no socket (a typo, the state's own files) never loses
    /// that file.
    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let tmp = crate::testing::temp_dir("control-file");
        let path = tmp.path().join("notes.txt");
        std::fs::write(&path, "keep me").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let bound = runtime.block_on(async { bind(&path) });
        assert!(
            matches!(bound, Err(ControlError::NotASocket { .. })),
            "{bound:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    }
}
