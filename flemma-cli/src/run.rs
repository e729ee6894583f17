//! `flemma run`: the autopilot loop on a transcript file, with a terminal UI.
//!
//! The assistant's text streams to stdout, one paragraph per response; status goes to stderr,
//! each result's first lines under its line: on a terminal a spinner per running tool
//! (indicatif) and y/n/reason prompts for pending calls (`--approve ask`, see [`ask`]),
//! otherwise plain lines without escape codes. Ctrl-C cancels the request or the tools; a
//! second Ctrl-C cancels everything; SIGTERM and SIGHUP cancel like Ctrl-C; the command then
//! exits within [`GRACE`] whatever is stuck.

use std::collections::HashMap;
use std::io::{IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::approval::async_trait;
use flemma::config::Layer;
use flemma::providers::{HttpProvider, Provider, ProviderKind, ScriptedProvider, TransportConfig};
use flemma::tools::{
    Answer, Approver, Conversation, ConversationError, Event, FileConversation, PendingCall,
    Revision, Snapshot,
};
use flemma::{Session, SessionEvent, Stop};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::options::Settings;
use crate::{Failure, failed};

mod ask;
mod results;
mod signals;

use signals::Signal;

/// `--provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RunProvider {
    Anthropic,
    Openai,
    OpenaiChat,
    Vertex,
    /// Replays `--script` (no network).
    Scripted,
}

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
    ) -> Result<Snapshot, ConversationError> {
        self.output.apply(revision, edits).await
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
        return Ok(Arc::new(FileConversation::new(&args.file)));
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
        output: FileConversation::new(output),
        origin,
    }))
}

fn provider(
    args: &RunArgs,
    model: Option<&str>,
    config: &flemma::config::Config,
) -> Result<Arc<dyn Provider>, Failure> {
    let kind = match args.provider {
        RunProvider::Scripted => {
            let script = args.script.as_ref().ok_or_else(|| {
                Failure::usage(anyhow::anyhow!("--provider scripted needs --script PATH"))
            })?;
            return ScriptedProvider::from_file(script)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
                .map_err(|e| Failure::usage(e.into()));
        }
        _ if args.script.is_some() => {
            return Err(Failure::usage(anyhow::anyhow!(
                "--script goes with --provider scripted"
            )));
        }
        RunProvider::Anthropic => ProviderKind::Anthropic,
        RunProvider::Openai => ProviderKind::OpenAiResponses,
        RunProvider::OpenaiChat => ProviderKind::OpenAiChat,
        RunProvider::Vertex => ProviderKind::Vertex,
    };
    let model = model.unwrap_or_else(|| kind.default_model());
    // `http.*` (timeouts, retries) from flemma.toml and --set; the frontmatter is read later.
    let options = config.options().map_err(|e| Failure::usage(e.into()))?;
    HttpProvider::from_env_with(kind, model, TransportConfig::from_options(&options))
        .map(|p| Arc::new(p) as Arc<dyn Provider>)
        .map_err(|e| Failure::usage(e.into()))
}

/// Approves every pending call (`--approve all`).
struct ApproveAll;

#[async_trait]
impl Approver for ApproveAll {
    async fn ask(&self, _call: &PendingCall) -> Answer {
        Answer::Approve
    }
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
    let conversation = conversation(args)?;
    let tty = std::io::stderr().is_terminal();
    let progress = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    crate::log::attach(&progress);
    let mut asks = false;
    let mut prompt = None;
    let mut executor = flemma::tools::Executor::builder(conversation, crate::tools::registry()?)
        .config(config)
        .sandbox_backends(flemma::tools::sandbox::SandboxBackends::with_builtins());
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
    let mut builder =
        Session::from_executor(executor, provider).template_engine(crate::template_engine(None)?);
    if let Some(max_turns) = args.max_turns {
        builder = builder.max_turns(max_turns);
    }
    let session = builder.build();
    let written = args.output.as_deref().unwrap_or(&args.file);
    let mut ui = Ui {
        tty,
        progress,
        running: HashMap::new(),
        previews: HashMap::new(),
        waiting: None,
        line_open: false,
        paragraph: Paragraph::None,
        path: written.to_owned(),
        file: written.display().to_string(),
        asks,
        usage: None,
    };
    let runtime = crate::tools::runtime()?;
    let driven = runtime.block_on(drive(&session, &mut ui, prompt));
    // A tool stuck in a blocking call (a read that never returns) must not keep the command
    // alive: the runtime is left behind instead of waiting for its blocking threads.
    drop(session);
    runtime.shutdown_background();
    ui.clear_waiting();
    let driven = driven
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("cannot listen for signals")))?;
    let code = |stop: Stop| match driven.signal {
        Some(signal) => signal.exit_code(),
        None if stop == Stop::Cancelled => 130,
        None => 0,
    };
    match driven.end {
        End::Stopped(Ok(stop)) => {
            ui.status(&format!("stopped: {}", stop_word(stop)));
            Ok(code(stop))
        }
        End::Stopped(Err(error)) => Err(match crate::options::option_errors(&error) {
            Some(errors) => crate::options::options_failure(&ui.file, errors),
            None => failed(anyhow::Error::new(error).context(ui.file.clone())),
        }),
        End::LeftPending => {
            ui.left_pending();
            let stop = if driven.signal.is_some() {
                Stop::Cancelled
            } else {
                Stop::AwaitingApproval
            };
            ui.status(&format!("stopped: {}", stop_word(stop)));
            Ok(code(stop))
        }
        End::Abandoned => {
            ui.status("stopped: cancelled (gave up waiting for the tools)");
            Ok(code(Stop::Cancelled))
        }
    }
}

/// How long the command waits, after the second Ctrl-C (or a SIGTERM or SIGHUP), for the
/// cancelled tools and request to write their abort text before it exits regardless.
const GRACE: Duration = Duration::from_secs(5);

/// How a run ended.
enum End {
    /// The session stopped by itself, or was cancelled and wrote its abort text.
    Stopped(Result<Stop, flemma::SessionError>),
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
                        flemma::Cancelled::Request => "the request",
                        flemma::Cancelled::Tools => "the running tools",
                        flemma::Cancelled::Resume => "the wait for background jobs",
                        flemma::Cancelled::Nothing => "nothing running",
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
    while let Some(event) = events.try_recv() {
        ui.show(&event);
    }
    Ok(Driven { end, signal })
}

fn stop_word(stop: Stop) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Where stdout's text stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paragraph {
    /// No text yet.
    None,
    /// The current response's text is being written.
    Open,
    /// A new response began after text: its text starts after a blank line.
    Next,
}

/// What the terminal shows.
struct Ui {
    tty: bool,
    progress: MultiProgress,
    /// The running calls: their spinner (on a terminal) and preview.
    running: HashMap<String, (Option<ProgressBar>, String)>,
    /// The previews of calls put to the user, for the line of their result.
    previews: HashMap<String, String>,
    /// The spinner shown while a request waits for its first token.
    waiting: Option<ProgressBar>,
    /// Whether stdout's last line is unfinished.
    line_open: bool,
    /// Where stdout's text stands, to set each response's text apart.
    paragraph: Paragraph,
    /// The transcript written, read back for the results shown.
    path: PathBuf,
    file: String,
    /// Whether pending calls are put to the user (else they wait in the file).
    asks: bool,
    /// The last token counts of the response (providers report them more than once).
    usage: Option<(Option<u64>, Option<u64>)>,
}

impl Ui {
    fn spinner(&self, message: String) -> ProgressBar {
        let bar = self.progress.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    }

    /// A status line on stderr (above the spinners on a terminal).
    fn status(&mut self, line: &str) {
        self.end_text_line();
        if self.tty {
            self.progress.suspend(|| {
                let _ = writeln!(std::io::stderr(), "{line}");
            });
        } else {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    fn text(&mut self, text: &str) {
        self.clear_waiting();
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.paragraph == Paragraph::Next {
            // Each response's text is a paragraph of its own.
            let _ = writeln!(out);
        }
        self.paragraph = Paragraph::Open;
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.line_open = !text.ends_with('\n');
    }

    fn end_text_line(&mut self) {
        if self.line_open {
            let _ = writeln!(std::io::stdout());
            self.line_open = false;
        }
    }

    /// The first lines of a result block, under its status line.
    fn result(&mut self, block: results::Block<'_>) {
        let Some(lines) = results::excerpt(&self.path, block) else {
            return;
        };
        for line in lines {
            if self.tty {
                // Dimmed, so that the status lines stand out.
                self.status(&format!("\x1b[2m    {line}\x1b[0m"));
            } else {
                self.status(&format!("    {line}"));
            }
        }
    }

    /// After a question went unanswered: the calls left pending and how to decide them.
    fn left_pending(&mut self) {
        for (tool, id) in results::pending(&self.path) {
            let file = &self.file;
            self.status(&format!(
                "pending: {tool} {id} (flemma approve {file} {id}, or flemma reject {file} {id})"
            ));
        }
    }

    fn clear_waiting(&mut self) {
        if let Some(bar) = self.waiting.take() {
            bar.finish_and_clear();
        }
    }

    fn show(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::RequestSending { turn } => {
                if self.paragraph == Paragraph::Open {
                    self.paragraph = Paragraph::Next;
                }
                if self.tty {
                    self.waiting = Some(self.spinner(format!("request {turn}: waiting…")));
                } else {
                    self.status(&format!("request {turn}"));
                }
            }
            SessionEvent::TextDelta(text) => self.text(text),
            SessionEvent::Retrying(retry) => {
                // `retrying in 3 s: HTTP 429 (attempt 2 of 4)`, above the waiting spinner.
                self.status(&retry.to_string());
            }
            SessionEvent::ThinkingDelta(_) | SessionEvent::ToolCallStarted { .. } => {
                if let Some(bar) = &self.waiting {
                    bar.set_message("the model is working…");
                }
            }
            SessionEvent::TurnFinished { .. } => {
                self.clear_waiting();
                self.end_text_line();
                if let Some((input, output)) = self.usage.take() {
                    let count =
                        |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
                    self.status(&format!(
                        "tokens: {} in, {} out",
                        count(input),
                        count(output)
                    ));
                }
            }
            SessionEvent::Usage {
                input_tokens,
                output_tokens,
            } => self.usage = Some((*input_tokens, *output_tokens)),
            SessionEvent::RequestAborted => self.status("request cancelled"),
            SessionEvent::Warning(warning) => self.status(&crate::notices::warning_line(warning)),
            SessionEvent::Tool(event) => self.tool(event),
            SessionEvent::ResumeScheduled { delay_ms } => {
                self.status(&format!("jobs delivered: resuming in {delay_ms} ms"));
            }
            SessionEvent::ResumeCancelled => self.status("resume cancelled"),
            SessionEvent::Resumed => self.status("resumed"),
            SessionEvent::Missed { count } => {
                self.status(&crate::notices::warning_line(&crate::notices::missed(
                    *count,
                )));
            }
            _ => {}
        }
    }

    fn tool(&mut self, event: &Event) {
        match event {
            Event::ToolExecuting { id, preview, .. } => {
                let bar = if self.tty {
                    Some(self.spinner(preview.clone()))
                } else {
                    self.status(&format!("running: {preview}"));
                    None
                };
                self.running.insert(id.to_string(), (bar, preview.clone()));
            }
            Event::ApprovalAsked { id, preview, .. } => {
                self.previews.insert(id.to_string(), preview.clone());
            }
            Event::ToolCompleted { id, tool, success } => {
                let mark = if *success { "ok" } else { "error" };
                let asked = self.previews.remove(id.as_str());
                let line = match (self.running.remove(id.as_str()), asked) {
                    (Some((bar, preview)), _) => {
                        if let Some(bar) = bar {
                            bar.finish_and_clear();
                        }
                        format!("{mark}: {preview}")
                    }
                    (None, Some(preview)) => format!("{mark}: {preview}"),
                    (None, None) => format!("{mark}: {tool} ({id})"),
                };
                self.status(&line);
                self.result(results::Block::Tool(id.as_str()));
            }
            Event::PlaceholdersPlaced(placed) if !self.asks => {
                for p in placed
                    .iter()
                    .filter(|p| p.status == flemma::ast::ToolStatus::Pending)
                {
                    let (tool, id, file) = (&p.tool, &p.id, &self.file);
                    let line = format!(
                        "pending: {tool} {id} (flemma approve {file} {id}, or flemma reject {file} {id})"
                    );
                    self.status(&line);
                }
            }
            Event::JobSubmitted {
                job_id, tool_id, ..
            } => {
                // Its call's spinner goes: it runs on in the background.
                if let Some((Some(bar), _)) = self.running.remove(tool_id.as_str()) {
                    bar.finish_and_clear();
                }
                self.status(&format!("background: {tool_id} is job {job_id}"));
            }
            Event::JobDelivered(done) => {
                let mark = if done.success { "ok" } else { "error" };
                self.status(&format!("{mark}: job {} ({})", done.job_id, done.tool));
                self.result(results::Block::Job(done.job_id.as_str()));
            }
            // Warnings and what recovery found: the line every command shows.
            other => {
                if let Some(notice) = crate::notices::Notice::of(other) {
                    self.status(&notice.line());
                }
            }
        }
    }
}
