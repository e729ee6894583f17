//! [`Transcript`]: the one owner of a conversation's text as the tool system sees it.
//!
//! A transcript holds the conversation's last snapshot parsed (one [`IncrementalParser`],
//! brought up to date by the edits it applies itself and by a diff when the text changed
//! elsewhere), the options evaluated from it (the host's layers with the frontmatter,
//! evaluated again only when the frontmatter's text or the registry's tools changed), what
//! follows from those options (the result store, the sandbox, the writer's options), and the
//! one revision-checked edit loop every change of the text goes through. The
//! [`Executor`](crate::Executor), its background jobs and a session are its clients: they
//! share one parse and one evaluation per revision of the text.

mod edit;
mod settings;
mod workspace;

use std::sync::{Arc, Mutex, PoisonError};

use flemma_ast::{Document, IncrementalParser};
use flemma_config::Config;

pub use settings::{Evaluated, Settings};
pub use workspace::CommandWorkspace;
pub(crate) use workspace::tool_cwd;

use crate::conversation::{Conversation, ConversationError, Snapshot};
use crate::registry::ToolRegistry;
use flemma_core::Revision;
use flemma_core::sandbox::SandboxBackends;

/// How many times an edit is recomputed when the conversation keeps changing under it.
pub const EDIT_ATTEMPTS: usize = 8;

/// What went wrong reading, evaluating or editing a [`Transcript`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The conversation could not be read or written.
    #[error("the conversation could not be read or written")]
    Conversation(#[from] ConversationError),
    /// The frontmatter does not evaluate.
    #[error("the frontmatter does not evaluate")]
    Frontmatter(#[from] flemma_config::FrontmatterError),
    /// The options do not resolve.
    #[error("the options do not resolve")]
    Config(#[from] flemma_config::ConfigError),
    /// The result store's options are wrong.
    #[error("the result store is misconfigured")]
    Store(#[from] flemma_store::StoreError),
    /// The text changed under every one of [`EDIT_ATTEMPTS`] attempts of an edit.
    #[error("the conversation kept changing; gave up after {EDIT_ATTEMPTS} attempts")]
    Busy,
    /// An edit did not apply.
    #[error("an edit did not apply")]
    Edit(#[source] flemma_ast::AstError),
    /// The command hooks of the options files (`[hooks]`) do not read: nothing runs without
    /// the host's hooks.
    #[error("the hooks of the options files are misconfigured")]
    Hooks(#[from] crate::hooks::HookConfigError),
}

/// A conversation's text, parsed, its options and the edit loop (see the [module
/// docs](self)). Cheap to share behind an `Arc`; every method takes `&self`.
///
/// ```
/// use std::sync::Arc;
/// use flemma_runtime::transcript::Transcript;
/// use flemma_runtime::{MemoryConversation, ToolRegistry};
///
/// let chat = Arc::new(MemoryConversation::new("@You:\nHello.\n"));
/// let transcript = Transcript::builder(chat.clone(), ToolRegistry::new()).build();
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// runtime.block_on(async {
///     let messages = transcript.read(|doc, _| doc.messages.len()).await?;
///     assert_eq!(messages, 1);
///     transcript
///         .edit(|doc, _| {
///             let end = doc.line_count + 1;
///             Ok::<_, flemma_runtime::transcript::TranscriptError>(vec![
///                 flemma_ast::TextEdit::insert(end, vec!["More.".to_owned()]),
///             ])
///         })
///         .await?;
///     let options = transcript.evaluated().await?;
///     assert!(options.options().tools.autopilot.enabled);
///     Ok::<_, flemma_runtime::transcript::TranscriptError>(())
/// })?;
/// assert_eq!(chat.text(), "@You:\nHello.\nMore.\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Transcript {
    conversation: Arc<dyn Conversation>,
    registry: ToolRegistry,
    config: Config,
    sandbox: SandboxBackends,
    conversation_id: String,
    /// The parsed text at a revision.
    parsed: Mutex<Option<Parsed>>,
    /// One edit at a time: an edit holds it from its snapshot to its write.
    editing: tokio::sync::Mutex<()>,
    /// The options last evaluated, and from what.
    evaluated: Mutex<Option<(settings::Key, Arc<Evaluated>)>>,
    /// What follows from the options last evaluated.
    settings: Mutex<Option<Arc<Settings>>>,
    /// How many frontmatters were evaluated.
    evaluations: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("conversation_id", &self.conversation_id)
            .finish_non_exhaustive()
    }
}

/// The parser at a revision, and its document shared when someone asked for it.
struct Parsed {
    revision: Revision,
    parser: IncrementalParser,
    shared: Option<Arc<Document>>,
}

/// Builds a [`Transcript`]; see [`Transcript::builder`].
#[must_use]
pub struct TranscriptBuilder {
    conversation: Arc<dyn Conversation>,
    registry: ToolRegistry,
    config: Config,
    sandbox: SandboxBackends,
    conversation_id: Option<String>,
}

impl std::fmt::Debug for TranscriptBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptBuilder")
            .field("conversation_id", &self.conversation_id)
            .finish_non_exhaustive()
    }
}

impl TranscriptBuilder {
    /// The options below the frontmatter (defaults, `flemma.toml`, runtime overrides).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The sandbox backends `sandbox.backend` selects from (default: none).
    pub fn sandbox_backends(mut self, backends: SandboxBackends) -> Self {
        self.sandbox = backends;
        self
    }

    /// The conversation's id for store paths (`bufnr`); default
    /// [`default_conversation_id`].
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.conversation_id = Some(id.into());
        self
    }

    /// The transcript.
    pub fn build(self) -> Transcript {
        let conversation_id = self
            .conversation_id
            .unwrap_or_else(|| default_conversation_id(self.conversation.as_ref()));
        Transcript {
            conversation: self.conversation,
            registry: self.registry,
            config: self.config,
            sandbox: self.sandbox,
            conversation_id,
            parsed: Mutex::new(None),
            editing: tokio::sync::Mutex::new(()),
            evaluated: Mutex::new(None),
            settings: Mutex::new(None),
            evaluations: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// The id (`bufnr` of store paths, `session_id` of hooks) of a conversation nobody named:
/// the conversation's own ([`Conversation::default_id`]), else for a conversation with a file
/// [`stable_conversation_id`] of the file's absolute path (the same in every process and
/// every run, different for another file), else an id no other conversation has.
pub fn default_conversation_id(conversation: &dyn Conversation) -> String {
    if let Some(id) = conversation.default_id() {
        return id.to_owned();
    }
    if let Some(path) = conversation.path() {
        return file_conversation_id(path);
    }
    crate::conversation::unique_id()
}

/// [`stable_conversation_id`] of the conversation in the file `chat`: of `file:` and its
/// absolute, resolved path ([`flemma_config::conversation_path`]).
pub fn file_conversation_id(chat: &std::path::Path) -> String {
    let chat = flemma_config::conversation_path(chat);
    let mut location = b"file:".to_vec();
    location.extend_from_slice(chat.as_os_str().as_encoded_bytes());
    stable_conversation_id(&location)
}

/// The id of the conversation kept at `location` (a file's `file:` path, an object's
/// `s3://bucket/key`): a UUID (version 8, from the SHA-256 of `location`), so that hook
/// scripts that key their state by `session_id`, as Claude Code's do, see one id per
/// conversation, the same on every run and every machine, and another for another one.
///
/// ```
/// use flemma_runtime::transcript::stable_conversation_id;
///
/// let id = stable_conversation_id(b"s3://chats/team/a.chat");
/// assert_eq!(id, stable_conversation_id(b"s3://chats/team/a.chat"));
/// assert_ne!(id, stable_conversation_id(b"s3://chats/team/b.chat"));
/// assert_eq!(id.len(), 36);
/// assert_eq!(&id[14..15], "8");
/// ```
pub fn stable_conversation_id(location: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(location);
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    crate::conversation::uuid_v8(bytes)
}

impl Transcript {
    /// Starts a transcript of `conversation`, its options evaluated against `registry`.
    pub fn builder(
        conversation: Arc<dyn Conversation>,
        registry: ToolRegistry,
    ) -> TranscriptBuilder {
        TranscriptBuilder {
            conversation,
            registry,
            config: Config::new(),
            sandbox: SandboxBackends::new(),
            conversation_id: None,
        }
    }

    /// The conversation.
    pub fn conversation(&self) -> &Arc<dyn Conversation> {
        &self.conversation
    }

    /// The registry the options are evaluated against.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The host's layers (below the frontmatter).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The sandbox backends.
    pub fn sandbox_backends(&self) -> &SandboxBackends {
        &self.sandbox
    }

    /// The conversation's id for store paths (`bufnr`).
    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    fn lock_parsed(&self) -> std::sync::MutexGuard<'_, Option<Parsed>> {
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the conversation, parses it (incrementally) and hands the document and its
    /// revision to `f`. `f` runs under the transcript's lock: it must not call the
    /// transcript (nor [`ExecutionContext::document`](flemma_core::ExecutionContext::document)).
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read.
    pub async fn read<T>(
        &self,
        f: impl FnOnce(&Document, Revision) -> T,
    ) -> Result<T, ConversationError> {
        let snapshot = self.conversation.snapshot().await?;
        let mut parsed = self.lock_parsed();
        let parsed = refresh(&mut parsed, &snapshot);
        Ok(f(parsed.parser.document(), snapshot.revision))
    }

    /// [`read`](Self::read) with the document's [`ToolIndex`](flemma_ast::ToolIndex) (built
    /// once per revision by the parser, shared by every reader and edit at that revision).
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read.
    pub(crate) async fn read_indexed<T>(
        &self,
        f: impl FnOnce(&Document, &flemma_ast::ToolIndex) -> T,
    ) -> Result<T, ConversationError> {
        let snapshot = self.conversation.snapshot().await?;
        let mut parsed = self.lock_parsed();
        let parser = &refresh(&mut parsed, &snapshot).parser;
        Ok(f(parser.document(), parser.tool_index()))
    }

    /// The conversation as it is now, parsed and shared: every caller at the same revision
    /// gets the same `Arc` (the document is copied out of the parser once per revision, and
    /// only when asked for).
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read.
    pub async fn document(&self) -> Result<(Arc<Document>, Revision), ConversationError> {
        let snapshot = self.conversation.snapshot().await?;
        let mut parsed = self.lock_parsed();
        let parsed = refresh(&mut parsed, &snapshot);
        Ok((shared(parsed), snapshot.revision))
    }

    /// The document as this transcript last read or wrote it, and its revision, without
    /// looking at the conversation again (`None` before the first read): a change someone
    /// else made since is not in it. For a display beside a running cycle (the result just
    /// written), where [`read`](Self::read) would wait for the conversation: never held across
    /// an `await`, so it may be called from anywhere, a task that polls the cycle included.
    /// `f` runs under the transcript's lock, as for [`read`](Self::read).
    pub fn read_parsed<T>(&self, f: impl FnOnce(&Document, Revision) -> T) -> Option<T> {
        let parsed = self.lock_parsed();
        let parsed = parsed.as_ref()?;
        Some(f(parsed.parser.document(), parsed.revision))
    }

    /// The conversation's text as it is now, the parser brought up to it.
    pub(crate) async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        let snapshot = self.conversation.snapshot().await?;
        refresh(&mut self.lock_parsed(), &snapshot);
        Ok(snapshot)
    }

    /// The document at `revision` if that is the revision parsed now; `None` otherwise (the
    /// text changed since).
    pub(crate) fn document_at(&self, revision: Revision) -> Option<Arc<Document>> {
        let mut parsed = self.lock_parsed();
        let parsed = parsed.as_mut().filter(|p| p.revision == revision)?;
        Some(shared(parsed))
    }
}

impl flemma_core::ParsedDocuments for Transcript {
    fn document_at(&self, revision: Revision) -> Option<Arc<Document>> {
        Transcript::document_at(self, revision)
    }
}

/// The parsed document, shared (copied out of the parser once per revision).
fn shared(parsed: &mut Parsed) -> Arc<Document> {
    Arc::clone(
        parsed
            .shared
            .get_or_insert_with(|| Arc::new(parsed.parser.document().clone())),
    )
}

/// The parser for `snapshot`, brought up to date.
fn refresh<'c>(cache: &'c mut Option<Parsed>, snapshot: &Snapshot) -> &'c mut Parsed {
    let parsed = cache.get_or_insert_with(|| Parsed {
        revision: snapshot.revision,
        parser: IncrementalParser::new(snapshot.text.as_str().to_owned()),
        shared: None,
    });
    if parsed.revision != snapshot.revision {
        if parsed.parser.text() != snapshot.text.as_str() {
            parsed.parser.update(&snapshot.text);
            parsed.shared = None;
        }
        parsed.revision = snapshot.revision;
    }
    parsed
}
