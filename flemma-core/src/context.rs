//! [`ExecutionContext`]: what a tool call knows about where it runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_ast::Document;
use flemma_config::Options;
use flemma_ids::{ToolName, ToolUseId};
use flemma_store::{ResultId, Store};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::sandbox::{Sandbox, expand_tilde, normalize};
use crate::truncate::{Direction, Limits, Overflow, truncate_with_overflow};

/// The context of one tool call: its id, working directory, timeout, the conversation it
/// belongs to, the sandbox, a cancellation token and truncation bound to the result store.
///
/// A cheap handle (clones share one state), so async tools can move it into their futures.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tool_id: ToolUseId,
    tool_name: ToolName,
    cwd: PathBuf,
    timeout: Duration,
    filename: Option<PathBuf>,
    options: Arc<Options>,
    /// The tool's own options: its definition's defaults under the conversation's table.
    tool_options: Option<serde_json::Map<String, Value>>,
    /// The conversation's text when the call started, parsed on first use.
    text: Arc<String>,
    document: std::sync::OnceLock<Arc<Document>>,
    /// The transcript that parsed `text` (at that revision): its document is shared instead.
    parsed: Option<(std::sync::Weak<dyn ParsedDocuments>, crate::Revision)>,
    sandbox: Sandbox,
    store: Option<Arc<Store>>,
    cancel: CancellationToken,
    /// The executor's jobs (for `flemma.jobs.status`).
    jobs: Option<Arc<dyn crate::JobLookup>>,
    /// The session's child conversations (for the `agent` tool).
    delegate: Option<Arc<dyn crate::Delegate>>,
    /// Where a bound truncation wrote the full output, so completion does not store it twice.
    overflow: Mutex<Option<PathBuf>>,
    /// Why the full output could not be written to the store, when it could not.
    overflow_error: Mutex<Option<Arc<flemma_store::StoreError>>>,
    /// Why the call ended without a result, when it did ([`ExecutionContext::defer`]).
    deferred: Mutex<Option<String>>,
    /// Where [`ExecutionContext::report_progress`] goes.
    progress: Option<ProgressSink>,
}

/// Where a call's progress reports go (the executor: an [`Event::ToolProgress`]).
///
/// [`Event::ToolProgress`]: crate::Event::ToolProgress
#[derive(Clone)]
struct ProgressSink(Arc<dyn Fn(crate::ToolProgress) + Send + Sync>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// Where a call's parsed document comes from: the runtime's transcript that parsed the call's
/// text (`flemma_runtime::transcript::Transcript`), seen only through this, so a context
/// shares that parse instead of parsing the text again.
pub trait ParsedDocuments: Send + Sync {
    /// The document at `revision` while that is the revision parsed; `None` once the text
    /// changed.
    fn document_at(&self, revision: crate::Revision) -> Option<Arc<Document>>;
}

/// Builds an [`ExecutionContext`]; the executor does this for every call, tests and hosts
/// that run a tool directly use it too.
#[derive(Debug)]
#[must_use]
pub struct ExecutionContextBuilder {
    tool_id: ToolUseId,
    tool_name: ToolName,
    cwd: Option<PathBuf>,
    timeout: Option<Duration>,
    filename: Option<PathBuf>,
    options: Option<Arc<Options>>,
    tool_defaults: Option<serde_json::Map<String, Value>>,
    text: Option<Arc<String>>,
    document: Option<Arc<Document>>,
    parsed: Option<(std::sync::Weak<dyn ParsedDocuments>, crate::Revision)>,
    sandbox: Sandbox,
    store: Option<Arc<Store>>,
    cancel: Option<CancellationToken>,
    jobs: Option<Arc<dyn crate::JobLookup>>,
    delegate: Option<Arc<dyn crate::Delegate>>,
    progress: Option<ProgressSink>,
}

impl ExecutionContext {
    /// Starts a context for the call `tool_id` of `tool_name`.
    pub fn builder(tool_id: ToolUseId, tool_name: ToolName) -> ExecutionContextBuilder {
        ExecutionContextBuilder {
            tool_id,
            tool_name,
            cwd: None,
            timeout: None,
            filename: None,
            options: None,
            tool_defaults: None,
            text: None,
            document: None,
            parsed: None,
            sandbox: Sandbox::disabled(),
            store: None,
            cancel: None,
            jobs: None,
            delegate: None,
            progress: None,
        }
    }

    /// The call's id.
    pub fn tool_id(&self) -> &ToolUseId {
        &self.inner.tool_id
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &ToolName {
        &self.inner.tool_name
    }

    /// The absolute working directory.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The call's time budget (`tools.default_timeout`, 30 s by default); tools that take a
    /// `timeout` input use it instead.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The conversation file (`__filename`), `None` for a conversation without one.
    pub fn filename(&self) -> Option<&Path> {
        self.inner.filename.as_deref()
    }

    /// The conversation file's directory (`__dirname`).
    pub fn dirname(&self) -> Option<&Path> {
        self.inner.filename.as_deref().and_then(Path::parent)
    }

    /// The conversation's resolved options.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The tool's own options (`tools.<name>`, keyed by the full name): the definition's
    /// defaults with the conversation's table over them; `None` when there are neither.
    pub fn tool_options(&self) -> Option<&serde_json::Map<String, Value>> {
        self.inner.tool_options.as_ref()
    }

    /// The parsed conversation as it was when the call started: the executor's own parse
    /// (one `Arc` shared by the calls started at that revision) while the conversation is
    /// still at that revision, else the text of that moment parsed on first use.
    pub fn document(&self) -> &Document {
        self.inner.document.get_or_init(|| {
            self.inner
                .parsed
                .as_ref()
                .and_then(|(transcript, revision)| transcript.upgrade()?.document_at(*revision))
                .unwrap_or_else(|| Arc::new(flemma_ast::parse(&self.inner.text)))
        })
    }

    /// The sandbox (`is_path_writable`, `wrap_command`).
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }

    /// The environment a process started for this call gets: the host process's variables
    /// under `tools.env` ([`flemma_config::EnvPolicy`]; by default without the provider keys
    /// and other credentials). Tools that spawn processes clear the inherited environment
    /// and pass this instead (`Command::env_clear().envs(ctx.environment())`), then add
    /// their own variables.
    pub fn environment(&self) -> Vec<(String, String)> {
        self.inner.options.tools.env.apply_to_process()
    }

    /// Whether the sandbox lets this call write `path` (relative to [`cwd`](Self::cwd)).
    pub fn is_path_writable(&self, path: &Path) -> bool {
        self.inner.sandbox.is_path_writable(path, &self.inner.cwd)
    }

    /// The executor's jobs, for `flemma.jobs.status`.
    pub fn jobs(&self) -> Option<&Arc<dyn crate::JobLookup>> {
        self.inner.jobs.as_ref()
    }

    /// Ends the call without a result: the executor puts its block back to `(approved)` and
    /// writes none of the output, so the call runs again at the conversation's next cycle,
    /// which waits for a person meanwhile (the session stops as for a pending call). For a
    /// call that cannot finish until someone decides something elsewhere: the `agent` tool
    /// whose child waits for an approval in its own transcript. `why` says what is awaited
    /// (the executor's `CallDeferred` event carries it). A background call cannot wait so: its
    /// output is delivered as it is.
    pub fn defer(&self, why: impl Into<String>) {
        *self
            .inner
            .deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why.into());
    }

    /// Why the call ended without a result, when [`defer`](Self::defer) said so.
    pub fn deferred(&self) -> Option<String> {
        self.inner
            .deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The session's child conversations, for the `agent` tool; `None` where the host runs
    /// tools without a session that lends them (a tools-only host, subagents not enabled).
    pub fn delegate(&self) -> Option<&Arc<dyn crate::Delegate>> {
        self.inner.delegate.as_ref()
    }

    /// Reports how far the call got: the executor forwards it as an
    /// `flemma_runtime::Event::ToolProgress` naming the call (a context built
    /// without [`on_progress`](ExecutionContextBuilder::on_progress) drops it).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use flemma_core::{ExecutionContext, ToolProgress};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// let ctx = ExecutionContext::builder("toolu_01".parse()?, "slow".parse()?)
    ///     .on_progress(move |p| sink.lock().unwrap().push(p))
    ///     .build()?;
    /// ctx.report_progress(ToolProgress::new(1.0).with_total(3.0));
    /// assert_eq!(seen.lock().unwrap().as_slice(), [ToolProgress::new(1.0).with_total(3.0)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn report_progress(&self, progress: crate::ToolProgress) {
        if let Some(sink) = &self.inner.progress {
            (sink.0)(progress);
        }
    }

    /// Cancelled when the call is cancelled or times out; long-running tools stop on it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// A path as the tool should use it (like the Flemma plugin's `path.resolve`): `~` expanded,
    /// absolute paths normalised, relative ones joined to the conversation's directory (the working
    /// directory of the call for a conversation without a file) and normalised. Always absolute:
    /// the conversation's file is resolved when the context is built.
    ///
    /// `read`, `write` and `edit` resolve their `path` with it;
    /// [`resolve_in_cwd`](Self::resolve_in_cwd) is the same resolver from the call's working
    /// directory.
    pub fn resolve_path(&self, path: &str) -> PathBuf {
        resolve_path(self.dirname().unwrap_or(&self.inner.cwd), path)
    }

    /// A path resolved as [`resolve_path`](Self::resolve_path) does, but relative paths from
    /// the call's working directory ([`cwd`](Self::cwd), `tools.<name>.cwd`): `ls`, `grep`
    /// and `find`.
    pub fn resolve_in_cwd(&self, path: &str) -> PathBuf {
        resolve_path(&self.inner.cwd, path)
    }

    /// Truncates an output, writing the full text to the result store under this call's id
    /// when something was cut, and remembers where, so the completion does not
    /// store the result a second time.
    pub fn truncate_with_overflow(
        &self,
        text: &str,
        direction: Direction,
        limits: Limits,
    ) -> Overflow {
        let sink = |full: &str| {
            let store = self.inner.store.as_deref()?;
            let id = ResultId::Tool(&self.inner.tool_id);
            match store.write_result(id, Some(&self.inner.tool_name), full) {
                Ok(path) => Some(path),
                Err(error) => {
                    self.record_overflow_error(error);
                    None
                }
            }
        };
        let overflow = truncate_with_overflow(text, direction, limits, &sink);
        if let Some(path) = &overflow.path {
            self.set_overflow_path(path.clone());
        }
        overflow
    }

    /// The result store of the conversation, when the call has one.
    pub fn store(&self) -> Option<&Store> {
        self.inner.store.as_deref()
    }

    /// A streaming write of this call's overflow file (the store path a truncation would
    /// write); `None` without a store or when it cannot be created (logged).
    pub fn overflow_writer(&self) -> Option<flemma_store::AtomicWriter> {
        let store = self.inner.store.as_deref()?;
        let id = ResultId::Tool(&self.inner.tool_id);
        match store.result_writer(id, Some(&self.inner.tool_name)) {
            Ok(writer) => Some(writer),
            Err(error) => {
                self.record_overflow_error(error);
                None
            }
        }
    }

    /// Notes that this call's full output could not be written to the store: logged, and kept
    /// for [`ExecutionContext::overflow_error`] so the executor warns the host (the first
    /// failure is kept).
    pub fn record_overflow_error(&self, error: flemma_store::StoreError) {
        tracing::warn!(tool_id = %self.inner.tool_id, %error, "full output not stored");
        self.inner
            .overflow_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| Arc::new(error));
    }

    /// Why this call's full output could not be written to the store, if a truncation tried
    /// and failed (the notice then names no file). The executor turns it into an
    /// `flemma_runtime::Event::Warning`.
    pub fn overflow_error(&self) -> Option<Arc<flemma_store::StoreError>> {
        self.inner
            .overflow_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records where this call's full output was written, so the completion does not store
    /// the result a second time.
    pub fn set_overflow_path(&self, path: PathBuf) {
        *self
            .inner
            .overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(path);
    }

    /// Where a bound truncation wrote this call's full output, if it did.
    pub fn overflow_path(&self) -> Option<PathBuf> {
        self.inner
            .overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The one path resolver of the tools: `~` expanded, `path` joined to `base` unless absolute,
/// `.` and `..` folded lexically (like the Flemma plugin's `path.resolve`).
///
/// ```
/// use std::path::Path;
///
/// assert_eq!(flemma_core::resolve_path(Path::new("/work"), "src/../x.rs"), Path::new("/work/x.rs"));
/// assert_eq!(flemma_core::resolve_path(Path::new("/work"), "/etc/./hosts"), Path::new("/etc/hosts"));
/// ```
pub fn resolve_path(base: &Path, path: &str) -> PathBuf {
    let env = |name: &str| std::env::var(name).ok();
    let expanded = expand_tilde(path, &env);
    if expanded.is_absolute() {
        normalize(&expanded)
    } else {
        normalize(&base.join(expanded))
    }
}

impl ExecutionContextBuilder {
    /// The working directory (default: the conversation's directory, else the process's); a
    /// relative one is taken against that default.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The time budget (default: `tools.default_timeout` of the options).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The conversation file; a relative one is resolved against the process's working
    /// directory when the context is built ([`flemma_config::conversation_path`]).
    pub fn filename(mut self, filename: impl Into<PathBuf>) -> Self {
        self.filename = Some(filename.into());
        self
    }

    /// The conversation's options (default: the built-in defaults).
    pub fn options(mut self, options: Arc<Options>) -> Self {
        self.options = Some(options);
        self
    }

    /// The defaults of the tool's own options (its definition's `config_defaults`).
    pub fn tool_defaults(mut self, defaults: serde_json::Map<String, Value>) -> Self {
        self.tool_defaults = Some(defaults);
        self
    }

    /// The parsed conversation (default: the parse of [`text`](Self::text)).
    pub fn document(mut self, document: Arc<Document>) -> Self {
        self.document = Some(document);
        self
    }

    /// The conversation's text, parsed only if the tool asks for the document.
    pub fn text(mut self, text: Arc<String>) -> Self {
        self.text = Some(text);
        self
    }

    /// The transcript that parsed the [`text`](Self::text) at `revision`: the document is its
    /// shared parse while the conversation is at that revision.
    pub fn transcript<T: ParsedDocuments + 'static>(
        mut self,
        transcript: &Arc<T>,
        revision: crate::Revision,
    ) -> Self {
        let weak: std::sync::Weak<T> = Arc::downgrade(transcript);
        self.parsed = Some((weak, revision));
        self
    }

    /// The sandbox (default: disabled).
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The result store truncation writes overflow to (default: none, so overflow notices
    /// name no file).
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The executor's jobs, for `flemma.jobs.status`.
    pub fn jobs<J: crate::JobLookup + 'static>(mut self, jobs: Arc<J>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// The session's child conversations, for the `agent` tool.
    pub fn delegate(mut self, delegate: Arc<dyn crate::Delegate>) -> Self {
        self.delegate = Some(delegate);
        self
    }

    /// Where [`ExecutionContext::report_progress`] goes (default: nowhere). The executor sets
    /// it to emit an `flemma_runtime::Event::ToolProgress`.
    pub fn on_progress(
        mut self,
        sink: impl Fn(crate::ToolProgress) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(ProgressSink(Arc::new(sink)));
        self
    }

    /// The cancellation token (default: a new one).
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Builds the context.
    ///
    /// # Errors
    ///
    /// [`flemma_config::ConfigError`] when no options were given and the defaults do not
    /// resolve (they always do for the built-in schema).
    pub fn build(self) -> Result<ExecutionContext, flemma_config::ConfigError> {
        let options = match self.options {
            Some(options) => options,
            None => Arc::new(flemma_config::Config::new().options()?),
        };
        let timeout = self
            .timeout
            .unwrap_or_else(|| Duration::from_secs(options.tools.default_timeout));
        let filename = self.filename.map(|file| {
            if file.is_absolute() {
                file
            } else {
                flemma_config::conversation_path(&file)
            }
        });
        let default_cwd = || {
            filename.as_deref().and_then(Path::parent).map_or_else(
                || std::env::current_dir().unwrap_or_default(),
                Path::to_owned,
            )
        };
        let cwd = match self.cwd {
            Some(cwd) if cwd.is_absolute() => normalize(&cwd),
            Some(cwd) => normalize(&default_cwd().join(cwd)),
            None => default_cwd(),
        };
        let configured = options.tool_options(&self.tool_name);
        let tool_options = match (self.tool_defaults, configured) {
            (None, None) => None,
            (Some(defaults), None) => Some(defaults),
            (None, Some(table)) => Some(table.clone()),
            (Some(mut defaults), Some(table)) => {
                defaults.extend(table.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(defaults)
            }
        };
        Ok(ExecutionContext {
            inner: Arc::new(Inner {
                tool_options,
                tool_id: self.tool_id,
                tool_name: self.tool_name,
                cwd,
                timeout,
                filename,
                options,
                text: self.text.unwrap_or_default(),
                document: self
                    .document
                    .map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from),
                parsed: self.parsed,
                sandbox: self.sandbox,
                store: self.store,
                cancel: self.cancel.unwrap_or_default(),
                jobs: self.jobs,
                delegate: self.delegate,
                overflow: Mutex::new(None),
                overflow_error: Mutex::new(None),
                deferred: Mutex::new(None),
                progress: self.progress,
            }),
        })
    }
}
