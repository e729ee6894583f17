//! `flemma run`: the autopilot loop on a transcript file, with a terminal UI.
//!
//! The assistant's text streams to stdout; status goes to stderr: on a terminal a spinner per
//! running tool (indicatif) and y/n/reason prompts for pending calls (`--approve ask`),
//! otherwise plain lines without escape codes. Ctrl-C cancels the request or the tools; a
//! second Ctrl-C cancels everything.

use std::collections::HashMap;
use std::io::{IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::approval::async_trait;
use flemma::config::Layer;
use flemma::providers::{HttpProvider, Provider, ProviderKind, ScriptedProvider};
use flemma::tools::{
    Answer, Approver, Conversation, ConversationError, Event, FileConversation, PendingCall,
    Revision, Snapshot,
};
use flemma::{Session, SessionEvent, Stop};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::options::Settings;
use crate::{Failure, failed};

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
    let origin = std::path::absolute(&args.file)
        .map_err(|e| usage(e, format!("cannot resolve {}", args.file.display())))?;
    Ok(Arc::new(Redirected {
        output: FileConversation::new(output),
        origin,
    }))
}

fn provider(args: &RunArgs, model: Option<&str>) -> Result<Arc<dyn Provider>, Failure> {
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
    HttpProvider::from_env(kind, model)
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

/// Asks on the terminal (`--approve ask`): `y` (or Enter) approves, `n` rejects, anything
/// else rejects with that text as the reason the model is told.
struct Ask {
    progress: MultiProgress,
}

#[async_trait]
impl Approver for Ask {
    async fn ask(&self, call: &PendingCall) -> Answer {
        let question = format!("allow {}? [Y/n/reason] ", call.preview);
        let progress = self.progress.clone();
        let line = tokio::task::spawn_blocking(move || {
            progress.suspend(|| {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{question}");
                let _ = err.flush();
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
        })
        .await;
        let Ok(Ok(line)) = line else {
            // No answer (closed stdin): the call is not run.
            return Answer::Reject(None);
        };
        match line.trim() {
            "" | "y" | "Y" | "yes" => Answer::Approve,
            "n" | "N" | "no" => Answer::Reject(None),
            reason => Answer::Reject(Some(reason.to_owned())),
        }
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
    let provider = provider(args, args.model.as_deref())?;
    let conversation = conversation(args)?;
    let tty = std::io::stderr().is_terminal();
    let progress = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let mut asks = false;
    let mut builder = Session::builder(conversation, crate::tools::registry()?, provider)
        .config(config)
        .template_engine(crate::template_engine(None)?)
        .sandbox_backends(flemma::tools::sandbox::SandboxBackends::with_builtins());
    match args.approve {
        ApproveMode::All => {
            asks = true;
            builder = builder.approver(Arc::new(ApproveAll));
        }
        ApproveMode::Ask if tty && std::io::stdin().is_terminal() => {
            asks = true;
            builder = builder.approver(Arc::new(Ask {
                progress: progress.clone(),
            }));
        }
        ApproveMode::Ask | ApproveMode::None => {}
    }
    if let Some(max_turns) = args.max_turns {
        builder = builder.max_turns(max_turns);
    }
    let session = builder.build();
    let written = args.output.as_deref().unwrap_or(&args.file);
    let mut ui = Ui {
        tty,
        progress,
        running: HashMap::new(),
        waiting: None,
        line_open: false,
        file: written.display().to_string(),
        asks,
        usage: None,
    };
    let result = crate::tools::runtime()?.block_on(drive(&session, &mut ui));
    ui.clear_waiting();
    match result {
        Ok(stop) => {
            ui.status(&format!("stopped: {}", stop_word(stop)));
            Ok(if stop == Stop::Cancelled { 130 } else { 0 })
        }
        Err(error) => Err(failed(anyhow::Error::new(error).context(ui.file.clone()))),
    }
}

/// Runs the session, showing its events and turning Ctrl-C into cancellation.
async fn drive(session: &Session, ui: &mut Ui) -> Result<Stop, flemma::SessionError> {
    let mut events = session.subscribe();
    let (interrupts, mut interrupted) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if interrupts.send(()).is_err() {
                break;
            }
        }
    });
    let run = session.run();
    tokio::pin!(run);
    let mut presses = 0u32;
    let result = loop {
        tokio::select! {
            biased;
            Some(()) = interrupted.recv() => {
                presses += 1;
                match presses {
                    1 => {
                        let what = match session.cancel() {
                            flemma::Cancelled::Request => "the request",
                            flemma::Cancelled::Tools => "the running tools",
                            flemma::Cancelled::Resume => "the wait for background jobs",
                            flemma::Cancelled::Nothing => "nothing running",
                        };
                        ui.status(&format!("cancelling {what}; Ctrl-C again cancels everything"));
                    }
                    2 => session.cancel_all(),
                    _ => std::process::exit(130),
                }
            }
            Some(event) = events.recv() => ui.show(&event),
            result = &mut run => break result,
        }
    };
    listener.abort();
    while let Some(event) = events.try_recv() {
        ui.show(&event);
    }
    result
}

fn stop_word(stop: Stop) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// What the terminal shows.
struct Ui {
    tty: bool,
    progress: MultiProgress,
    /// The running calls: their spinner (on a terminal) and preview.
    running: HashMap<String, (Option<ProgressBar>, String)>,
    /// The spinner shown while a request waits for its first token.
    waiting: Option<ProgressBar>,
    /// Whether stdout's last line is unfinished.
    line_open: bool,
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

    fn clear_waiting(&mut self) {
        if let Some(bar) = self.waiting.take() {
            bar.finish_and_clear();
        }
    }

    fn show(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::RequestSending { turn } => {
                if self.tty {
                    self.waiting = Some(self.spinner(format!("request {turn}: waiting…")));
                } else {
                    self.status(&format!("request {turn}"));
                }
            }
            SessionEvent::TextDelta(text) => self.text(text),
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
            SessionEvent::Warning(warning) => self.status(&format!("warning: {warning}")),
            SessionEvent::Tool(event) => self.tool(event),
            SessionEvent::ResumeScheduled { delay_ms } => {
                self.status(&format!("jobs delivered: resuming in {delay_ms} ms"));
            }
            SessionEvent::ResumeCancelled => self.status("resume cancelled"),
            SessionEvent::Resumed => self.status("resumed"),
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
            Event::ToolCompleted { id, tool, success } => {
                let mark = if *success { "ok" } else { "error" };
                let line = match self.running.remove(id.as_str()) {
                    Some((bar, preview)) => {
                        if let Some(bar) = bar {
                            bar.finish_and_clear();
                        }
                        format!("{mark}: {preview}")
                    }
                    None => format!("{mark}: {tool} ({id})"),
                };
                self.status(&line);
            }
            Event::PlaceholdersPlaced(placed) if !self.asks => {
                for p in placed
                    .iter()
                    .filter(|p| p.status == flemma::ast::ToolStatus::Pending)
                {
                    let line = format!(
                        "pending: {} {} (flemma approve {} {})",
                        p.tool, p.id, self.file, p.id
                    );
                    self.status(&line);
                }
            }
            Event::Warning(warning) => self.status(&format!("warning: {warning}")),
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
            }
            Event::JobsRecovered(found) => {
                let line = format!(
                    "jobs: {} re-adopted, {} finished while away, {} lost, {} run elsewhere",
                    found.adopted.len(),
                    found.finished.len(),
                    found.lost.len(),
                    found.elsewhere.len()
                );
                self.status(&line);
            }
            _ => {}
        }
    }
}
