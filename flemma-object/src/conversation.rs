//! [`ObjectConversation`]: a transcript kept as one object, edited by conditional puts.

use std::sync::Arc;

use bytes::Bytes;
use flemma_ast::TextEdit;
use flemma_core::Revision;
use flemma_core::{Conversation, ConversationError, Durability, Snapshot};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::bucket::Bucket;
use crate::error::ObjectError;
use crate::journal::BucketJournal;
use crate::lease::Lease;
use crate::machine::Machine;
use crate::results::{BucketResults, Writes};

/// A conversation whose text is one object of a bucket.
///
/// The object's `ETag` is its version: [`snapshot`](Conversation::snapshot) asks for the object
/// only if it changed (a conditional `GET` with `If-None-Match`, answered "not modified" when
/// it did not; under a lease not at all, see [`with_lease`](Self::with_lease)), and [`apply`](Conversation::apply) writes the new text with `If-Match` on the
/// version it was computed from. When another writer changed the object in between, the put
/// is refused, the new text is read, and `apply` answers [`ConversationError::Stale`]: the
/// executor computes its edits again on the new text, as it does for a file, and no writer's
/// change is lost.
///
/// Appends asked for as [`Durability::Buffered`] (a response while it streams, the
/// placeholders of a cycle's Phase 1) are kept in memory and written by
/// [`sync`](Conversation::sync) or the next durable change, as one put: a crash before then
/// loses them (the request is sent again, the placeholders placed again), the text before is never
/// touched. If another writer changed the object while such appends were held, the put is
/// refused and the appends are dropped with an error ([`ConversationError::Remote`]), never
/// written over the other writer's text.
///
/// With a [`Lease`] ([`with_lease`](Self::with_lease)), every put is refused once the lease
/// is no longer safely held (see [`Lease::check`]): a host that lost its lease never writes.
///
/// ```
/// use std::sync::Arc;
/// use flemma_object::{Bucket, ObjectConversation};
/// use flemma_core::{Conversation, Durability};
/// use flemma_ast::TextEdit;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let bucket = Bucket::with_store("chats", Arc::new(object_store::memory::InMemory::new()));
/// let key = "team/a.chat".into();
/// let chat = ObjectConversation::create(&bucket, &key, "@You:\nhello\n").await?;
/// let snap = chat.snapshot().await?;
/// let world = [TextEdit::insert(3, vec!["world".into()])];
/// chat.apply(snap.revision, &world, Durability::Durable).await?;
///
/// // Another host's view of the same object sees the change.
/// let other = ObjectConversation::open(&bucket, &key).await?;
/// assert_eq!(*other.snapshot().await?.text, "@You:\nhello\nworld\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ObjectConversation {
    bucket: Bucket,
    key: ObjectPath,
    url: String,
    /// The conversation's id: of its URL, the same on every worker.
    id: String,
    lease: Option<Arc<Lease>>,
    local: Option<std::path::PathBuf>,
    results: Option<Arc<BucketResults>>,
    machine: Option<Arc<Machine>>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug)]
struct State {
    snapshot: Snapshot,
    /// The version of the object the text was read from or written as.
    version: UpdateVersion,
    /// Appends held in memory, not yet put.
    dirty: bool,
}

fn version(e_tag: Option<String>, version: Option<String>) -> UpdateVersion {
    UpdateVersion { e_tag, version }
}

impl ObjectConversation {
    /// The conversation in the object `key` of `bucket` (one `GET`).
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when it cannot be read (it does not exist, the bucket cannot
    /// be reached), [`ObjectError::NotUtf8`].
    pub async fn open(bucket: &Bucket, key: &ObjectPath) -> Result<Self, ObjectError> {
        let url = bucket.url(key);
        let (text, read) = read(bucket, key, &url).await?;
        Ok(Self::with_state(bucket, key, url, text, read))
    }

    /// Creates the object `key` with `text` (a conditional create: refused when the object
    /// exists) and opens it.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when the object exists or cannot be written.
    pub async fn create(
        bucket: &Bucket,
        key: &ObjectPath,
        text: impl Into<String>,
    ) -> Result<Self, ObjectError> {
        let url = bucket.url(key);
        let text = text.into();
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = bucket
            .store()
            .put_opts(key, PutPayload::from(text.clone()), opts)
            .await
            .map_err(|e| ObjectError::request(url.clone(), "create", e))?;
        Ok(Self::with_state(
            bucket,
            key,
            url,
            text,
            version(put.e_tag, put.version),
        ))
    }

    fn with_state(
        bucket: &Bucket,
        key: &ObjectPath,
        url: String,
        text: String,
        read: UpdateVersion,
    ) -> Self {
        Self {
            bucket: bucket.clone(),
            key: key.clone(),
            id: flemma_runtime::transcript::stable_conversation_id(url.as_bytes()),
            url,
            lease: None,
            local: None,
            results: None,
            machine: None,
            state: tokio::sync::Mutex::new(State {
                snapshot: Snapshot {
                    text: Arc::new(text),
                    revision: Revision(0),
                },
                version: read,
                dirty: false,
            }),
        }
    }

    /// Writes only while `lease` is held: every put checks it first ([`Lease::check`]).
    ///
    /// Under a lease this host is the conversation's only runner, so snapshots are taken from
    /// what it read or wrote last, without a request; a change someone else made to the
    /// object meanwhile (a user's edit) is found by the next put, refused by `If-Match`: the
    /// new text is read then and the executor computes its edits again on it.
    #[must_use]
    pub fn with_lease(mut self, lease: Arc<Lease>) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Gives the conversation a place on this machine, `path` (made absolute; the file itself
    /// is never read or written): the conversation's [`path`](Conversation::path), so that
    /// its tools work in `path`'s directory and the sandbox lets them write there (not in the
    /// host's working directory, shared by every conversation it runs), and its result store
    /// and call claims are kept beside it, as for a file. A worker gives each conversation a
    /// directory of its own ([`local_path`](crate::local_path)).
    ///
    /// The results its store writes under `LOCAL_DIR/.flemma/NAME/` (the default store path)
    /// are also copied to the bucket, under `dir/.flemma/name.chat/`, before the next put of
    /// the transcript (one `PUT` each): a transcript on the bucket never names a result that is
    /// not there, and [`fetch_results`](Self::fetch_results) brings them to the next host.
    /// Other files its tools write (`flemma.save_to`, a store path configured elsewhere) stay
    /// on this machine.
    #[must_use]
    pub fn with_local_path(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        let path = path.into();
        let path = std::path::absolute(&path).unwrap_or(path);
        self.results = Some(Arc::new(BucketResults::new(&path, &self.key)));
        self.local = Some(path);
        self
    }

    /// Keeps the conversation's job journal on the bucket, as a host of `machine`
    /// ([`BucketJournal`]: `dir/.flemma/name.chat/jobs/`), so that a host of another machine
    /// that runs it later finds its jobs: left to `machine` while a host of it lives, answered
    /// lost after. Without a machine, the journal is kept in files beside the conversation's
    /// local path, seen by this machine only. Needs a local path
    /// ([`with_local_path`](Self::with_local_path)), where the jobs' output stays. The host
    /// should say it lives while it runs ([`Machine::keep_announced`], as a [`Worker`](crate::Worker)
    /// does): the other machines take the jobs of a host that does not for gone.
    #[must_use]
    pub fn with_machine(mut self, machine: Arc<Machine>) -> Self {
        self.machine = Some(machine);
        self
    }

    /// Copies the conversation's results from the bucket (`dir/.flemma/name.chat/…`) to its
    /// local store directory (`LOCAL_DIR/.flemma/NAME/`), where the transcript's paths name
    /// them: one `LIST`, and one `GET` for each file missing here or of another size. What a
    /// host does when it takes a conversation another host ran ([`take`](crate::take) does
    /// it). Returns how many were copied; 0 without a local path.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when the bucket cannot be listed or read,
    /// [`ObjectError::Results`] when a file cannot be written here.
    pub async fn fetch_results(&self) -> Result<usize, ObjectError> {
        match &self.results {
            Some(results) => results.download(&self.bucket).await,
            None => Ok(0),
        }
    }

    /// Reads the object again if it changed since it was last read or written (one
    /// conditional `GET`): what a host does once it has taken the lease, before it trusts
    /// its copy.
    ///
    /// # Errors
    ///
    /// [`ConversationError::Remote`] when it cannot be read; held buffered appends are kept
    /// and nothing is read then.
    pub async fn revalidate(&self) -> Result<(), ConversationError> {
        let mut state = self.state.lock().await;
        if state.dirty {
            return Ok(());
        }
        self.refresh(&mut state).await
    }

    /// The object's URL (`s3://bucket/key`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object's key.
    pub fn key(&self) -> &ObjectPath {
        &self.key
    }

    /// The bucket.
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    fn remote(&self, message: &str, source: ObjectError) -> ConversationError {
        ConversationError::Remote {
            location: self.url.clone(),
            message: message.to_owned(),
            source: Box::new(source),
        }
    }

    /// Buffered appends refused: another writer changed the object first.
    fn conflict(&self) -> ConversationError {
        self.remote(
            "another writer changed the conversation while a response was being written; the \
             response was not stored",
            ObjectError::Conflict {
                url: self.url.clone(),
            },
        )
    }

    /// Reads the object again if it changed since `state` was read; the revision moves on
    /// when it did.
    async fn refresh(&self, state: &mut State) -> Result<(), ConversationError> {
        let options = GetOptions {
            if_none_match: state.version.e_tag.clone(),
            ..GetOptions::default()
        };
        match self.bucket.store().get_opts(&self.key, options).await {
            Err(object_store::Error::NotModified { .. }) => Ok(()),
            Err(source) => Err(self.remote(
                "cannot read the conversation",
                ObjectError::request(self.url.clone(), "get", source),
            )),
            Ok(got) => {
                let (e_tag, object_version) = (got.meta.e_tag.clone(), got.meta.version.clone());
                let text = decode(got, &self.url)
                    .await
                    .map_err(|e| self.remote("cannot read the conversation", e))?;
                if e_tag.is_some() && e_tag == state.version.e_tag {
                    // A store that does not answer "not modified".
                    return Ok(());
                }
                state.snapshot = Snapshot {
                    text: Arc::new(text),
                    revision: Revision(state.snapshot.revision.0 + 1),
                };
                state.version = version(e_tag, object_version);
                Ok(())
            }
        }
    }

    /// Puts `text` over the version `state` holds. `Ok(false)` when another writer changed the
    /// object first (the new text is read into `state` then).
    async fn put(&self, state: &mut State, text: &str) -> Result<bool, ConversationError> {
        if let Some(lease) = &self.lease {
            lease
                .check()
                .map_err(|e| self.remote("not written: the lease is no longer held", e))?;
        }
        // The results the text may name go first: a transcript on the bucket never names a
        // result that is not there.
        if let Some(results) = &self.results {
            results
                .upload(&self.bucket)
                .await
                .map_err(|e| self.remote("not written: a result could not be copied", e))?;
        }
        let opts = PutOptions {
            mode: PutMode::Update(state.version.clone()),
            ..PutOptions::default()
        };
        let payload = PutPayload::from(Bytes::copy_from_slice(text.as_bytes()));
        match self.bucket.store().put_opts(&self.key, payload, opts).await {
            Ok(put) => {
                state.version = version(put.e_tag, put.version);
                Ok(true)
            }
            Err(object_store::Error::Precondition { .. }) => {
                state.dirty = false;
                self.refresh(state).await?;
                Ok(false)
            }
            Err(source) => Err(self.remote(
                "cannot write the conversation",
                ObjectError::request(self.url.clone(), "put", source),
            )),
        }
    }
}

async fn decode(got: object_store::GetResult, url: &str) -> Result<String, ObjectError> {
    let bytes = got
        .bytes()
        .await
        .map_err(|e| ObjectError::request(url.to_owned(), "get", e))?;
    String::from_utf8(bytes.to_vec()).map_err(|source| ObjectError::NotUtf8 {
        url: url.to_owned(),
        source,
    })
}

async fn read(
    bucket: &Bucket,
    key: &ObjectPath,
    url: &str,
) -> Result<(String, UpdateVersion), ObjectError> {
    let got = bucket
        .store()
        .get_opts(key, GetOptions::default())
        .await
        .map_err(|e| ObjectError::request(url.to_owned(), "get", e))?;
    let read = version(got.meta.e_tag.clone(), got.meta.version.clone());
    Ok((decode(got, url).await?, read))
}

#[async_trait::async_trait]
impl Conversation for ObjectConversation {
    async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        let mut state = self.state.lock().await;
        // Under a lease this host is the conversation's only runner: the text it read or
        // wrote last is taken as current, and a change by anyone else is found by the next
        // put (refused by `If-Match`, the new text read then).
        if !state.dirty && self.lease.is_none() {
            self.refresh(&mut state).await?;
        }
        Ok(state.snapshot.clone())
    }

    async fn apply(
        &self,
        revision: Revision,
        edits: &[TextEdit],
        durability: Durability,
    ) -> Result<Snapshot, ConversationError> {
        let mut state = self.state.lock().await;
        if state.snapshot.revision != revision {
            return Err(ConversationError::Stale {
                expected: revision,
                actual: state.snapshot.revision,
            });
        }
        if edits.is_empty() {
            return Ok(state.snapshot.clone());
        }
        let text = flemma_ast::apply_edits(&state.snapshot.text, edits)
            .map_err(ConversationError::Edit)?;
        let appends = text.starts_with(state.snapshot.text.as_str());
        if appends && durability == Durability::Buffered {
            state.dirty = true;
        } else {
            let held = state.dirty;
            if !self.put(&mut state, &text).await? {
                return Err(if held {
                    self.conflict()
                } else {
                    ConversationError::Stale {
                        expected: revision,
                        actual: state.snapshot.revision,
                    }
                });
            }
            state.dirty = false;
        }
        state.snapshot = Snapshot {
            text: Arc::new(text),
            revision: Revision(revision.0 + 1),
        };
        Ok(state.snapshot.clone())
    }

    fn path(&self) -> Option<&std::path::Path> {
        self.local.as_deref()
    }

    /// The id of the conversation's URL
    /// ([`stable_conversation_id`](flemma_runtime::transcript::stable_conversation_id)): every
    /// worker of a fleet gives a conversation the same id (hooks' `session_id`), whatever its
    /// local path.
    fn default_id(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn job_journal(
        &self,
        store_dir: &std::path::Path,
    ) -> Option<Arc<dyn flemma_core::jobs::JobJournal>> {
        let machine = Arc::clone(self.machine.as_ref()?);
        Some(Arc::new(BucketJournal::new(
            &self.bucket,
            machine,
            &self.key,
            store_dir,
        )))
    }

    fn placements(&self) -> Option<Arc<dyn flemma_core::placements::Placements>> {
        Some(Arc::new(crate::placements::BucketPlacements::new(
            &self.bucket,
            &self.key,
        )))
    }

    fn store_writes(&self) -> Option<Arc<dyn flemma_store::StoreWrites>> {
        let results = Arc::clone(self.results.as_ref()?);
        Some(Arc::new(Writes(results)))
    }

    async fn sync(&self) -> Result<(), ConversationError> {
        let mut state = self.state.lock().await;
        if !state.dirty {
            return Ok(());
        }
        let text = Arc::clone(&state.snapshot.text);
        if self.put(&mut state, &text).await? {
            state.dirty = false;
            return Ok(());
        }
        Err(self.conflict())
    }
}
