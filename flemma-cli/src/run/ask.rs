//! The approval prompt of `flemma run --approve ask`.
//!
//! Only an explicit yes runs a call: `y` or `yes` approves, `n` or `no` rejects, any other text
//! rejects with that text as the reason (the model is told `User feedback: <text>`), and an
//! empty line asks again. End of input (Ctrl-D) answers nothing: the run stops and the call
//! stays `(pending)` in the transcript, to be approved or rejected later (`flemma approve` /
//! `flemma reject`). Ctrl-C, SIGTERM or SIGHUP at the prompt does the same at once (the run's
//! loop sees the signal while [`Prompt::is_open`]).
//!
//! Standard input is read on a thread of its own, so that waiting for a line never holds up a
//! signal; what was typed before a question was shown never answers it.

use std::io::{BufRead as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flemma::async_trait;
use flemma::core::{Answer, Approver, PendingCall};
use indicatif::{MultiProgress, ProgressDrawTarget};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, error::TryRecvError};

/// What was read from standard input.
#[derive(Debug)]
enum Read {
    /// A complete line (its newline removed).
    Line(String),
    /// End of input, a read error, or a last line without its newline.
    End,
}

/// What the run's loop knows of the prompt.
#[derive(Debug)]
pub(super) struct Prompt {
    open: Arc<AtomicBool>,
    ended: UnboundedReceiver<()>,
}

impl Prompt {
    /// Whether a question waits for its answer now.
    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Resolves when a question met the end of input (the call is left pending).
    pub(super) async fn ended(&mut self) {
        if self.ended.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// The approver that asks on the terminal.
pub(super) struct Ask {
    progress: MultiProgress,
    open: Arc<AtomicBool>,
    ended: UnboundedSender<()>,
    input: tokio::sync::Mutex<Option<UnboundedReceiver<Read>>>,
}

/// The approver and the loop's view of it.
pub(super) fn prompt(progress: MultiProgress) -> (Ask, Prompt) {
    let open = Arc::new(AtomicBool::new(false));
    let (ended, ended_rx) = tokio::sync::mpsc::unbounded_channel();
    (
        Ask {
            progress,
            open: Arc::clone(&open),
            ended,
            input: tokio::sync::Mutex::new(None),
        },
        Prompt {
            open,
            ended: ended_rx,
        },
    )
}

/// What an answer means: `None` asks again.
fn answer(line: &str) -> Option<Answer> {
    let text = line.trim();
    match text.to_lowercase().as_str() {
        "" => None,
        "y" | "yes" => Some(Answer::Approve),
        "n" | "no" => Some(Answer::Reject(None)),
        _ => Some(Answer::Reject(Some(text.to_owned()))),
    }
}

/// Reads standard input line by line until its end.
fn reader() -> UnboundedReceiver<Read> {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    // Not a runtime's blocking task: the command may exit while this waits for a line.
    let spawned = std::thread::Builder::new()
        .name("flemma-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            loop {
                let mut line = String::new();
                let read = match stdin.read_line(&mut line) {
                    Ok(_) if line.ends_with('\n') => {
                        line.pop();
                        if line.ends_with('\r') {
                            line.pop();
                        }
                        Read::Line(line)
                    }
                    _ => Read::End,
                };
                let end = matches!(read, Read::End);
                if sender.send(read).is_err() || end {
                    break;
                }
            }
        });
    if spawned.is_err() {
        // No thread, no answers: the channel is closed, which reads as the end of input.
        tracing::warn!("cannot start the thread that reads the answers");
    }
    receiver
}

/// Discards what the terminal holds but nobody read yet.
fn discard_typeahead() {
    #[cfg(unix)]
    let _ = rustix::termios::tcflush(std::io::stdin(), rustix::termios::QueueSelector::IFlush);
}

impl Ask {
    fn say(&self, text: &str) {
        self.progress.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{text}");
            let _ = err.flush();
        });
    }

    /// Waits for an answer; `None` at the end of input.
    async fn read(&self, question: &str) -> Option<Answer> {
        let mut input = self.input.lock().await;
        // Lines typed before the question (or an earlier Ctrl-D) do not answer it.
        discard_typeahead();
        let mut lines = match input.take() {
            Some(mut lines) => loop {
                match lines.try_recv() {
                    Ok(_) => {}
                    Err(TryRecvError::Empty) => break lines,
                    Err(TryRecvError::Disconnected) => break reader(),
                }
            },
            None => reader(),
        };
        self.say(question);
        let answer = loop {
            match lines.recv().await {
                Some(Read::Line(line)) => {
                    if let Some(answer) = answer(&line) {
                        break Some(answer);
                    }
                    self.say(
                        "answer y to run it, n to reject it, or why you reject it \
                         (Ctrl-D or Ctrl-C leaves it pending)\n",
                    );
                    self.say(question);
                }
                Some(Read::End) | None => break None,
            }
        };
        *input = Some(lines);
        answer
    }
}

impl std::fmt::Debug for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask").finish_non_exhaustive()
    }
}

#[async_trait]
impl Approver for Ask {
    async fn ask(&self, call: &PendingCall) -> Answer {
        // The preview is the model's input: on one line, nothing in it steers the terminal.
        let question = format!(
            "allow {}? [y/n/reason] ",
            crate::visible::line(&call.preview)
        );
        self.open.store(true, Ordering::SeqCst);
        // No spinner draws over the question while it waits.
        self.progress.set_draw_target(ProgressDrawTarget::hidden());
        let answer = self.read(&question).await;
        self.progress.set_draw_target(ProgressDrawTarget::stderr());
        let Some(answer) = answer else {
            self.say("\n");
            // The run stops here and the call stays pending: this future is dropped with it.
            let _ = self.ended.send(());
            return std::future::pending().await;
        };
        self.open.store(false, Ordering::SeqCst);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_yes_approves() {
        assert_eq!(answer("y"), Some(Answer::Approve));
        assert_eq!(answer(" YES "), Some(Answer::Approve));
        assert_eq!(answer("n"), Some(Answer::Reject(None)));
        assert_eq!(answer("No"), Some(Answer::Reject(None)));
        assert_eq!(answer(""), None);
        assert_eq!(answer("  "), None);
        assert_eq!(
            answer("yy"),
            Some(Answer::Reject(Some("yy".into()))),
            "a typo is no yes"
        );
        assert_eq!(
            answer(" use ls instead "),
            Some(Answer::Reject(Some("use ls instead".into())))
        );
    }
}
