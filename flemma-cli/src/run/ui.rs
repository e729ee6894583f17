//! What `flemma run` shows: the assistant's text on stdout, status lines on stderr (above a
//! spinner per running tool on a terminal), each result's first lines under its line.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::runtime::Event;
use flemma::runtime::SessionEvent;
use flemma::runtime::transcript::Transcript;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::results;

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
pub(super) struct Ui {
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
    /// The transcript written, read back for the calls left pending.
    path: PathBuf,
    /// The session's transcript, whose parse has the results just written.
    transcript: Option<Arc<Transcript>>,
    pub(super) file: String,
    /// Whether pending calls are put to the user (else they wait in the file).
    asks: bool,
    /// The run's usage so far, for its last line.
    usage: Option<flemma::runtime::usage::UsageTotals>,
    /// `--json`: the summary's parts, and no model text on stdout.
    summary: Option<Summary>,
}

/// What `flemma run --json` prints when the run ends.
#[derive(Default)]
struct Summary {
    requests: Vec<flemma::runtime::usage::RequestUsage>,
    totals: flemma::runtime::usage::UsageTotals,
    budget: Option<flemma::runtime::usage::BudgetReached>,
}

impl Ui {
    /// The view of a run writing `path`; `asks` when pending calls are put to the user.
    pub(super) fn new(tty: bool, progress: MultiProgress, path: &Path, asks: bool) -> Self {
        Self {
            tty,
            progress,
            running: HashMap::new(),
            previews: HashMap::new(),
            waiting: None,
            line_open: false,
            paragraph: Paragraph::None,
            path: path.to_owned(),
            transcript: None,
            file: path.display().to_string(),
            asks,
            usage: None,
            summary: None,
        }
    }

    /// `--json`: keeps what the summary needs, and writes no model text on stdout.
    pub(super) fn summarize(&mut self) {
        self.summary = Some(Summary::default());
    }

    /// Whether a summary is kept (`--json`).
    pub(super) fn summarizing(&self) -> bool {
        self.summary.is_some()
    }

    /// Prints the summary on stdout: how the run ended and what it used.
    pub(super) fn summary(&mut self, stop: Option<&str>, exit_code: u8, error: Option<&str>) {
        let Some(summary) = self.summary.take() else {
            return;
        };
        let requests: Vec<serde_json::Value> = summary
            .requests
            .iter()
            .map(|r| {
                serde_json::json!({
                    "turn": r.turn,
                    "provider": r.provider,
                    "model": r.model,
                    "usage": r.usage,
                    "cost": r.cost,
                })
            })
            .collect();
        let totals = &summary.totals;
        let mut report = serde_json::json!({
            "stop": stop,
            "exit_code": exit_code,
            "usage": {
                "requests": totals.requests,
                "usage": totals.usage,
                "cost": totals.known_cost(),
                "priced_cost": totals.cost,
                "unpriced_requests": totals.unpriced,
            },
            "requests": requests,
            "budget": summary.budget,
        });
        if let Some(error) = error {
            report["error"] = serde_json::Value::from(error);
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{report}");
        let _ = out.flush();
    }

    /// Shows the results from `transcript`'s parse (the run's session's) instead of reading
    /// the file back.
    pub(super) fn results_from(&mut self, transcript: Arc<Transcript>) {
        self.transcript = Some(transcript);
    }

    fn spinner(&self, message: &str) -> ProgressBar {
        let bar = self.progress.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(crate::visible::line(message).into_owned());
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    }

    /// A status line on stderr (above the spinners on a terminal).
    pub(super) fn status(&mut self, line: &str) {
        // Names, ids, previews and warnings come from the model, tools and servers: nothing
        // in them steers the terminal, and none starts a line of its own.
        self.status_raw(&crate::visible::line(line));
    }

    /// [`status`](Self::status) of a line made visible already (with our own escapes).
    fn status_raw(&mut self, line: &str) {
        self.end_text_line();
        // One write per line (stderr is unbuffered: `writeln!` would make two).
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        if self.tty {
            self.progress.suspend(|| {
                let _ = std::io::stderr().write_all(&bytes);
            });
        } else {
            let _ = std::io::stderr().write_all(&bytes);
        }
    }

    fn text(&mut self, text: &str) {
        self.clear_waiting();
        if text.is_empty() || self.summary.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.paragraph == Paragraph::Next {
            // Each response's text is a paragraph of its own.
            let _ = writeln!(out);
        }
        self.paragraph = Paragraph::Open;
        // On a terminal the model's text cannot steer it; piped, it is written as it came.
        let shown = if self.tty {
            crate::visible::text(text)
        } else {
            std::borrow::Cow::Borrowed(text)
        };
        let _ = out.write_all(shown.as_bytes());
        let _ = out.flush();
        self.line_open = !text.ends_with('\n');
    }

    fn end_text_line(&mut self) {
        if self.line_open {
            let _ = writeln!(std::io::stdout());
            self.line_open = false;
        }
    }

    /// Whether the conversation ends with a model's answer that asks for no tool (messages
    /// of no known role and a blank `@You:` after it aside), from the session's parse when
    /// there is one, as [`result`](Self::result) reads it.
    pub(super) fn ends_with_an_answer(&self) -> bool {
        let ends = |doc: &flemma::ast::Document| {
            doc.messages
                .iter()
                .rev()
                .find(|m| m.role.is_known() && !m.is_blank())
                .is_some_and(|m| {
                    m.role == flemma::ast::Role::Assistant && m.tool_uses().next().is_none()
                })
        };
        match &self.transcript {
            Some(transcript) => transcript.read_parsed(|doc, _| ends(doc)),
            None => results::document(&self.path).map(|doc| ends(&doc)),
        }
        .unwrap_or(false)
    }

    /// The first lines of a result block, under its status line.
    fn result(&mut self, block: results::Block<'_>) {
        // The transcript's parse has the result just written; the file holds the same text.
        let lines = match &self.transcript {
            Some(transcript) => transcript
                .read_parsed(|doc, _| results::excerpt(doc, block))
                .flatten(),
            None => results::document(&self.path).and_then(|doc| results::excerpt(&doc, block)),
        };
        let Some(lines) = lines else {
            return;
        };
        for line in lines {
            let line = crate::visible::line(&line);
            if self.tty {
                // Dimmed, so that the status lines stand out.
                self.status_raw(&format!("\x1b[2m    {line}\x1b[0m"));
            } else {
                self.status_raw(&format!("    {line}"));
            }
        }
    }

    /// The run's usage (`usage: 3 requests, 40.1k in, 1.2k out, $0.051`), when a request
    /// reported some.
    pub(super) fn run_usage(&mut self) {
        if let Some(totals) = self.usage.take() {
            self.status(&format!("usage: {}", crate::usage::totals(&totals)));
        }
    }

    /// After a question went unanswered: the calls left pending and how to decide them.
    pub(super) fn left_pending(&mut self) {
        for (tool, id) in results::pending(&self.path) {
            let file = &self.file;
            self.status(&format!(
                "pending: {tool} {id} (flemma approve {file} {id}, or flemma reject {file} {id})"
            ));
        }
    }

    pub(super) fn clear_waiting(&mut self) {
        if let Some(bar) = self.waiting.take() {
            bar.finish_and_clear();
        }
    }

    pub(super) fn show(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::RequestSending { turn } => {
                if self.paragraph == Paragraph::Open {
                    self.paragraph = Paragraph::Next;
                }
                if self.tty {
                    self.waiting = Some(self.spinner(&format!("request {turn}: waiting…")));
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
            }
            SessionEvent::Usage(usage) => {
                // `request 3: 12.4k in (9.8k cached), 310 out, $0.012`.
                self.clear_waiting();
                let what = if usage.compaction {
                    "summary request".to_owned()
                } else {
                    format!("request {}", usage.turn)
                };
                self.status(&format!(
                    "{what}: {}",
                    crate::usage::request(&usage.usage, usage.cost)
                ));
                self.usage = Some(usage.run);
                if let Some(summary) = &mut self.summary {
                    summary.totals = usage.run;
                    summary.requests.push(usage.clone());
                }
            }
            SessionEvent::Compacting {
                messages, tokens, ..
            } => {
                self.status(&format!(
                    "compacting: {messages} messages ({} tokens)",
                    crate::usage::tokens(*tokens)
                ));
            }
            SessionEvent::Compacted(compacted) => {
                self.status(&format!(
                    "compacted: {} messages into a {}-token summary at line {}",
                    compacted.messages,
                    crate::usage::tokens(compacted.summary_tokens),
                    compacted.line
                ));
            }
            SessionEvent::RequestAborted => self.status("request cancelled"),
            SessionEvent::BudgetReached(reached) => {
                self.status(&format!("budget: {reached}"));
                if let Some(summary) = &mut self.summary {
                    summary.budget = Some(reached.clone());
                }
            }
            SessionEvent::PromptBlocked { hook, reason } => {
                self.status(&format!(
                    "not sent: hook '{hook}' blocked the prompt: {reason}"
                ));
            }
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
            SessionEvent::Subagent { agent, event, .. } => self.subagent(agent, event),
            _ => {}
        }
    }

    /// A subagent's calls as status lines of their own, the agent named first
    /// (`reviewer: running: bash: $ make`); its text stays in its transcript.
    fn subagent(&mut self, agent: &str, event: &SessionEvent) {
        match event {
            SessionEvent::Tool(Event::ToolExecuting { preview, .. }) => {
                self.status(&format!("{agent}: running: {preview}"));
            }
            SessionEvent::Tool(Event::ToolCompleted { id, tool, success }) => {
                let mark = if *success { "ok" } else { "error" };
                self.status(&format!("{agent}: {mark}: {tool} ({id})"));
            }
            SessionEvent::Subagent {
                agent: inner,
                event,
                ..
            } => self.subagent(&format!("{agent}: {inner}"), event),
            _ => {}
        }
    }

    fn tool(&mut self, event: &Event) {
        match event {
            Event::ToolExecuting { id, preview, .. } => {
                let bar = if self.tty {
                    Some(self.spinner(preview))
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
            Event::CallDeferred { id, .. } => {
                if let Some((Some(bar), _)) = self.running.remove(id.as_str()) {
                    bar.finish_and_clear();
                }
                if let Some(notice) = crate::notices::Notice::of(event) {
                    self.status(&notice.line());
                }
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
