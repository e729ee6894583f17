//! `flemma run`: the autopilot loop on a transcript file, with a terminal UI.
//!
//! The assistant's text streams to stdout, one paragraph per response; status goes to stderr,
//! each result's first lines under its line: on a terminal a spinner per running tool
//! (indicatif) and y/n/reason prompts for pending calls (`--approve ask`, see [`ask`]),
//! otherwise plain lines without escape codes. Ctrl-C cancels the request or the tools; a
//! second Ctrl-C cancels everything; SIGTERM and SIGHUP cancel like Ctrl-C; the command then
//! exits within [`GRACE`] whatever is stuck.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::async_trait;
use flemma::config::Layer;
use flemma::core::Revision;
use flemma::core::{Conversation, ConversationError, Durability, Snapshot};
use flemma::providers::Provider;
use flemma::runtime::FileConversation;
use flemma::runtime::{Session, Stop};
use indicatif::{MultiProgress, ProgressDrawTarget};

use crate::failure::{Failure, failed};
use crate::options::Settings;
use crate::setup::{ApproveAll, RunProvider, make_provider, session_of};

mod ask;
mod results;
mod signals;
mod ui;

use signals::{GRACE, Signal};
use ui::Ui;

/// `--approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ApproveMode {
    /// Ask y/n/reason per pending call on a terminal; elsewhere like `none`.
    Ask,
    /// Approve every pending call.
    All,
    /// Leave pending calls in the transcript and stop.
    None,
}

/// The arguments of `flemma run`.
#[derive(Debug)]
pub(crate) struct RunArgs {
    pub(crate) file: PathBuf,
    pub(crate) provider: RunProvider,
    pub(crate) model: Option<String>,
    pub(crate) script: Option<PathBuf>,
    pub(crate) approve: ApproveMode,
    pub(crate) max_turns: Option<u64>,
    pub(crate) output: Option<PathBuf>,
    /// A JSON summary on stdout instead of the model's text.
    pub(crate) json: bool,
}

/// FILE's conversation kept in another file: reads and writes go to `output`; the tools'
/// working directory, `@./file` references and the store resolve against FILE.
struct Redirected {
    output: FileConversation,
    origin: PathBuf,
}

#[async_trait]
impl Conversation for Redirected {
    async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        self.output.snapshot().await
    }

    async fn apply(
        &self,
        revision: Revision,
        edits: &[flemma::ast::TextEdit],
        durability: Durability,
    ) -> Result<Snapshot, ConversationError> {
        self.output.apply(revision, edits, durability).await
    }

    async fn sync(&self) -> Result<(), ConversationError> {
        self.output.sync().await
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.origin)
    }
}

fn usage(error: impl Into<anyhow::Error>, context: String) -> Failure {
    Failure::usage(error.into().context(context))
}

fn conversation(args: &RunArgs) -> Result<Arc<dyn Conversation>, Failure> {
    // A regular file of UTF-8 text, as every command reads FILE (exit 2 otherwise).
    crate::input::Input::check(&args.file)?;
    // `--output FILE` is FILE itself (copying a file onto itself would empty it).
    let same = |output: &PathBuf| {
        matches!(
            (std::fs::canonicalize(output), std::fs::canonicalize(&args.file)),
            (Ok(a), Ok(b)) if a == b
        )
    };
    let Some(output) = args.output.as_ref().filter(|o| !same(o)) else {
        // One conversation on a current-thread runtime: its file work needs no other thread.
        return Ok(Arc::new(FileConversation::new(&args.file).with_inline_io()));
    };
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| usage(e, format!("cannot create {}", dir.display())))?;
    }
    std::fs::copy(&args.file, output).map_err(|e| {
        usage(
            e,
            format!(
                "cannot copy {} to {}",
                args.file.display(),
                output.display()
            ),
        )
    })?;
    let origin = flemma::config::conversation_path(&args.file);
    Ok(Arc::new(Redirected {
        output: FileConversation::new(output).with_inline_io(),
        origin,
    }))
}

fn provider(
    args: &RunArgs,
    model: Option<&str>,
    config: &flemma::config::Config,
) -> Result<Arc<dyn Provider>, Failure> {
    make_provider(args.provider, args.script.as_deref(), model, config)
}

/// The session of `flemma run`, with the approver `--approve` asks for: whether pending
/// calls are decided here (else they wait in the file), and the prompt that asks, if any.
fn session(
    args: &RunArgs,
    config: flemma::config::Config,
    conversation: Arc<dyn Conversation>,
    provider: Arc<dyn Provider>,
    tty: bool,
    progress: &MultiProgress,
) -> Result<(Session, bool, Option<ask::Prompt>), Failure> {
    let mut asks = false;
    let mut prompt = None;
    let registry = crate::setup::registry(&config)?;
    let subagents = crate::setup::subagents(&registry, conversation.path())?;
    let models = crate::setup::models(&config)?;
    let mut executor = crate::setup::executor(conversation, registry, config);
    match args.approve {
        ApproveMode::All => {
            asks = true;
            executor = executor.approver(Arc::new(ApproveAll));
        }
        ApproveMode::Ask if tty && std::io::stdin().is_terminal() => {
            asks = true;
            let (approver, view) = ask::prompt(progress.clone());
            prompt = Some(view);
            executor = executor.approver(Arc::new(approver));
        }
        ApproveMode::Ask | ApproveMode::None => {}
    }
    Ok((
        session_of(executor, provider, models, args.max_turns, subagents)?,
        asks,
        prompt,
    ))
}

/// `flemma run FILE`.
pub(crate) fn run(args: &RunArgs, settings: &Settings) -> Result<u8, Failure> {
    let mut config = settings.load()?;
    if let Some(model) = &args.model {
        config
            .set(Layer::Runtime, "model", model.as_str())
            .map_err(|e| Failure::usage(e.into()))?;
    }
    let provider = provider(args, args.model.as_deref(), &config)?;
    #[cfg(feature = "object-store")]
    let object = crate::object::open_for_run(&args.file, args.output.as_deref())?;
    #[cfg(feature = "object-store")]
    let conversation = match &object {
        Some(object) => object.conversation(),
        None => conversation(args)?,
    };
    #[cfg(not(feature = "object-store"))]
    let conversation = conversation(args)?;
    let tty = std::io::stderr().is_terminal();
    let progress = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    crate::log::attach(&progress);
    let (session, asks, prompt) = session(args, config, conversation, provider, tty, &progress)?;
    let written = args.output.as_deref().unwrap_or(&args.file);
    let mut ui = Ui::new(tty, progress, written, asks);
    if args.json {
        ui.summarize();
    }
    ui.results_from(std::sync::Arc::clone(session.executor().transcript()));
    let runtime = crate::runtime::runtime()?;
    let driven = runtime.block_on(drive(&session, &mut ui, prompt));
    #[cfg(feature = "object-store")]
    if let Some(object) = object {
        runtime.block_on(object.release());
    }
    // A tool stuck in a blocking call (a read that never returns) must not keep the command
    // alive: the runtime is left behind instead of waiting for its blocking threads, when the
    // command ends (`runtime::finish`).
    drop(session);
    drop(runtime);
    ui.clear_waiting();
    let driven = driven
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("cannot listen for signals")))?;
    finish(driven, &mut ui)
}

/// The exit code of a run that ended as `driven` did, after its last status line.
fn finish(driven: Driven, ui: &mut Ui) -> Result<u8, Failure> {
    ui.run_usage();
    let (result, stop) = ended(driven, ui);
    if ui.summarizing() {
        let (code, error) = match &result {
            Ok(code) => (*code, None),
            Err(failure) => (
                failure.code,
                failure.error.as_ref().map(crate::failure::describe),
            ),
        };
        ui.summary(stop.map(stop_word).as_deref(), code, error.as_deref());
    }
    result
}

/// The exit code (or failure) of a run that ended as `driven` did, after its last status
/// lines, and the stop it ended with.
fn ended(driven: Driven, ui: &mut Ui) -> (Result<u8, Failure>, Option<Stop>) {
    let code = |stop: Stop| match driven.signal {
        Some(signal) => signal.exit_code(),
        None => exit_code(stop),
    };
    match driven.end {
        End::Stopped(Ok(stop)) => {
            ui.status(&format!("stopped: {}", stop_word(stop)));
            let ends_answered = stop == Stop::Idle && ui.ends_with_an_answer();
            if let Some(next) = what_next(stop, &ui.file, ends_answered) {
                ui.status(&next);
            }
            (Ok(code(stop)), Some(stop))
        }
        End::Stopped(Err(error)) => (
            Err(match crate::options::option_errors(&error) {
                Some(errors) => crate::options::options_failure(&ui.file, errors),
                None => failed(anyhow::Error::new(error).context(ui.file.clone())),
            }),
            None,
        ),
        End::LeftPending => {
            ui.left_pending();
            let stop = if driven.signal.is_some() {
                Stop::Cancelled
            } else {
                Stop::AwaitingApproval
            };
            ui.status(&format!("stopped: {}", stop_word(stop)));
            (Ok(code(stop)), Some(stop))
        }
        End::Abandoned => {
            ui.status("stopped: cancelled (gave up waiting for the tools)");
            (Ok(code(Stop::Cancelled)), Some(Stop::Cancelled))
        }
    }
}

/// How a run ended.
enum End {
    /// The session stopped by itself, or was cancelled and wrote its abort text.
    Stopped(Result<Stop, flemma::runtime::SessionError>),
    /// A question at the prompt got no answer (end of input, a signal): the run was dropped
    /// there, nothing of its cycle ran, and its calls stay pending.
    LeftPending,
    /// The cancelled run did not finish within [`GRACE`] (a tool stuck in a blocking call, a
    /// write that cannot finish), or a signal came again meanwhile.
    Abandoned,
}

struct Driven {
    end: End,
    /// The signal that ended the run, if one did.
    signal: Option<Signal>,
}

/// Runs the session, showing its events and turning signals into cancellation: the first
/// Ctrl-C cancels what runs (the request or the tools); the second cancels everything, a
/// SIGTERM or SIGHUP what the first Ctrl-C would, and either gives the abort text [`GRACE`] to
/// be written; one more signal ends the command at once. At the prompt, any of them stops the
/// run at once, the call left pending.
async fn drive(
    session: &Session,
    ui: &mut Ui,
    mut prompt: Option<ask::Prompt>,
) -> std::io::Result<Driven> {
    let mut events = session.subscribe();
    let mut signals = signals::listen()?;
    let run = session.run();
    tokio::pin!(run);
    let mut interrupts = 0u32;
    let mut signal: Option<Signal> = None;
    let grace = tokio::time::sleep(Duration::MAX);
    tokio::pin!(grace);
    let mut giving_up = false;
    let end = loop {
        tokio::select! {
            biased;
            Some(received) = signals.recv() => {
                // A termination request outranks Ctrl-C in the exit code.
                if signal.is_none_or(|s| s == Signal::Interrupt) {
                    signal = Some(received);
                }
                if prompt.as_ref().is_some_and(ask::Prompt::is_open) {
                    ui.status(&format!("\n{}: the call is not run", received.name()));
                    break End::LeftPending;
                }
                if giving_up {
                    break End::Abandoned;
                }
                if received == Signal::Interrupt && interrupts == 0 {
                    interrupts += 1;
                    let what = match session.cancel() {
                        flemma::runtime::Cancelled::Request => "the request",
                        flemma::runtime::Cancelled::Tools => "the running tools",
                        flemma::runtime::Cancelled::Resume => "the wait for background jobs",
                        flemma::runtime::Cancelled::Nothing => "nothing running",
                    };
                    ui.status(&format!("cancelling {what}; Ctrl-C again cancels everything"));
                } else {
                    // A SIGTERM or SIGHUP cancels what a Ctrl-C would (background jobs go on
                    // when the run only waits for them); after a Ctrl-C, everything.
                    let what = if received == Signal::Interrupt || interrupts > 0 {
                        session.cancel_all();
                        "everything"
                    } else {
                        session.cancel();
                        "what runs"
                    };
                    giving_up = true;
                    grace.as_mut().reset(tokio::time::Instant::now() + GRACE);
                    ui.status(&format!(
                        "{}: cancelling {what}; exiting within {} s",
                        received.name(),
                        GRACE.as_secs()
                    ));
                }
            }
            () = async {
                match prompt.as_mut() {
                    Some(prompt) => prompt.ended().await,
                    None => std::future::pending().await,
                }
            } => break End::LeftPending,
            () = &mut grace, if giving_up => break End::Abandoned,
            Some(event) = events.recv() => ui.show(&event),
            result = &mut run => break End::Stopped(result),
        }
    };
    // The session's end, for its `SessionEnd` hooks (not when the run was given up on).
    if !matches!(end, End::Abandoned) {
        session
            .end(if signal.is_some() { "signal" } else { "exit" })
            .await;
    }
    while let Some(event) = events.try_recv() {
        ui.show(&event);
    }
    Ok(Driven { end, signal })
}

/// The exit code of a run that stopped on its own (the book's "The `flemma` command", exit codes): 0 the model
/// answered or there was nothing to do, 3 a call waits for approval, 4 a limit or setting
/// stopped the loop (`--max-turns`, autopilot off), 5 background jobs still run, 6 a
/// `UserPromptSubmit` hook blocked the send, 7 a budget was reached, 130 cancelled.
pub(crate) fn exit_code(stop: Stop) -> u8 {
    match stop {
        Stop::Finished | Stop::Idle => 0,
        Stop::AwaitingApproval => 3,
        Stop::MaxTurns | Stop::AutopilotOff => 4,
        Stop::Running => 5,
        Stop::PromptBlocked => 6,
        Stop::BudgetReached => 7,
        Stop::Cancelled => 130,
        // A stop this build does not know: not a success.
        _ => 1,
    }
}

/// What the user can do next, after the `stopped:` line, where it is not obvious (an idle
/// stop is only explained when the conversation ends with the model's answer: otherwise the
/// warnings above said why).
fn what_next(stop: Stop, file: &str, ends_answered: bool) -> Option<String> {
    match stop {
        Stop::Idle if ends_answered => Some(format!(
            "nothing to do: {file} ends with the model's answer; add a @You: message and run again"
        )),
        Stop::MaxTurns | Stop::AutopilotOff => Some(format!(
            "the model's calls wait: run again to go on (flemma run {file})"
        )),
        Stop::Running => Some(format!(
            "background jobs still run: run again once they end (flemma jobs {file})"
        )),
        Stop::BudgetReached => Some(format!(
            "nothing more was sent: raise the budget (budget.run.*, budget.conversation.*) and run again (flemma usage {file} shows what was spent)"
        )),
        _ => None,
    }
}

fn stop_word(stop: Stop) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
