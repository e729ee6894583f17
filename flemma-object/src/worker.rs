//! [`Worker`]: runs the ready conversations under a prefix, each under its lease, with any
//! number of other workers on any number of machines.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_ast::{Document, Role, ToolStatus};
use flemma_core::Conversation;
use object_store::path::Path as ObjectPath;
use tokio_util::sync::CancellationToken;

use crate::bucket::{Bucket, RequestCounts};
use crate::conversation::ObjectConversation;
use crate::error::ObjectError;
use crate::lease::{Acquired, Lease, LeaseRecord};
use crate::machine::Machine;

/// How a [`Worker`] runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// How many conversations it runs at once (at least 1).
    pub concurrency: usize,
    /// The leases' time to live: a conversation whose worker died is taken over this long
    /// after its last renewal at the latest.
    pub lease_ttl: Duration,
    /// How long it waits between looks at the prefix when it has room for more.
    pub poll_interval: Duration,
    /// Its name in the leases it holds: unique among the workers.
    pub holder: String,
    /// Whether a conversation whose last calls wait for approval (`(pending)`) is ready: true
    /// for a worker whose runner approves them (an approver that says yes to each, or to
    /// some), false (the default) for one that leaves them to a person.
    pub runs_pending: bool,
    /// Where the conversations live on this machine: `WORKDIR/BUCKET/KEY` is each one's
    /// local path ([`ObjectConversation::with_local_path`]; its directory made when it is
    /// taken): its tools work there, its store and claims are kept there. `None`: no local
    /// path (the tools work in the process's working directory).
    pub workdir: Option<std::path::PathBuf>,
}

impl WorkerOptions {
    /// One conversation at a time, leases of 30 seconds, a look every second; the holder
    /// named after the machine, the process and the time it started.
    pub fn new() -> Self {
        Self {
            concurrency: 1,
            lease_ttl: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            holder: default_holder(),
            runs_pending: false,
            workdir: None,
        }
    }

    /// Gives each conversation a directory of its own under `workdir` ([`local_path`]).
    #[must_use]
    pub fn workdir(mut self, workdir: impl Into<std::path::PathBuf>) -> Self {
        self.workdir = Some(workdir.into());
        self
    }

    /// Takes conversations whose calls wait for approval too (see
    /// [`runs_pending`](Self::runs_pending)).
    #[must_use]
    pub fn runs_pending(mut self, runs_pending: bool) -> Self {
        self.runs_pending = runs_pending;
        self
    }

    /// Runs up to `concurrency` conversations at once.
    #[must_use]
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Leases of `ttl`.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// Looks at the prefix every `interval` when it has room.
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Names this worker `holder` in its leases.
    #[must_use]
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self::new()
    }
}

fn default_holder() -> String {
    let host = crate::machine::host_name().unwrap_or_else(|| "host".to_owned());
    format!(
        "{host}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    )
}

/// One conversation given to the host's runner, under its lease.
#[derive(Debug)]
#[non_exhaustive]
pub struct Assignment {
    /// The conversation, whose puts check the lease.
    pub conversation: Arc<ObjectConversation>,
    /// Its URL.
    pub url: String,
    /// The lease, renewed by the worker while the runner runs.
    pub lease: Arc<Lease>,
    /// The calls a dead holder left in progress, answered with the lost-call error before
    /// the runner was called.
    pub recovered: Vec<String>,
    /// Cancelled when the lease is lost or the worker is asked to stop: the runner should
    /// end the conversation's run (cancel its session) then.
    pub stop: CancellationToken,
}

/// What one runner call did, as the worker reports it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Finished {
    /// The conversation.
    pub url: String,
    /// The object requests its run made (reads, writes, the lease's).
    pub requests: RequestCounts,
    /// How many of them renewed the lease ([`Lease::renewals`](crate::Lease::renewals)):
    /// one every third of the lease's time to live while the run lasts, however much it does.
    pub lease_renewals: u64,
    /// The runner's error, if it failed.
    pub error: Option<String>,
    /// The calls answered as lost before it ran.
    pub recovered: usize,
}

/// Whether a conversation has work for a worker: its last message is the user's with
/// something in it and (unless `runs_pending`) no call of it waits for approval, or it is the
/// assistant's with calls that have no result block yet.
///
/// ```
/// use flemma_object::is_ready;
///
/// assert!(is_ready(&flemma_ast::parse("@You:\nhello\n"), false));
/// assert!(!is_ready(&flemma_ast::parse("@You:\nhi\n\n@Assistant:\nhello\n\n@You:\n"), false));
/// ```
pub fn is_ready(doc: &Document, runs_pending: bool) -> bool {
    let Some(last) = doc.messages.last() else {
        return false;
    };
    match last.role {
        Role::You => {
            let empty = last.is_blank();
            let waiting = last
                .tool_results()
                .any(|r| r.status == Some(ToolStatus::Pending));
            !empty && (runs_pending || !waiting)
        }
        Role::Assistant => {
            let answered: HashSet<&str> = doc
                .messages
                .iter()
                .flat_map(flemma_ast::Message::tool_results)
                .map(|r| r.tool_use_id.as_str())
                .collect();
            last.tool_uses().any(|u| !answered.contains(u.id.as_str()))
        }
        _ => false,
    }
}

/// A worker: any number of them, on any number of machines, share the conversations under one
/// prefix of a bucket. Each conversation is run by at most one of them at a time (its lease).
#[derive(Debug, Clone)]
pub struct Worker {
    bucket: Bucket,
    prefix: ObjectPath,
    options: WorkerOptions,
    /// What its looks at the prefix learnt (shared by the clones).
    seen: Arc<Seen>,
}

/// What a worker's looks at its prefix learnt: the keys warned of (each once per process, not
/// at each look), and the last listing's hints (where its skipped keys were).
#[derive(Debug, Default)]
struct Seen {
    warned: Mutex<HashSet<(&'static str, String)>>,
    hints: Mutex<crate::listing::Hints>,
}

impl Seen {
    /// Whether `key` is warned of for the first time as `kind`.
    fn first(&self, kind: &'static str, key: &str) -> bool {
        self.warned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((kind, key.to_owned()))
    }
}

impl Worker {
    /// A worker of the `.chat` objects under `prefix` (at any depth; the store prefixes
    /// `.flemma/` are skipped).
    pub fn new(bucket: Bucket, prefix: ObjectPath, options: WorkerOptions) -> Self {
        Self {
            bucket,
            prefix,
            options,
            seen: Arc::default(),
        }
    }

    /// The conversations under the prefix, with their versions (one `LIST` per 1,000).
    ///
    /// On a bucket listed page by page ([`Bucket::with_paginated_store`], [`Bucket::from_env`]),
    /// a key that is not a valid object path (a `.`, `..` or empty segment, a control
    /// character) is skipped, with a warning (once per key and process) that names it,
    /// escaped; the others are listed.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when the bucket cannot be listed.
    pub async fn conversations(&self) -> Result<Vec<(ObjectPath, Option<String>)>, ObjectError> {
        let hints = self
            .seen
            .hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let listed = self.bucket.list_all(&self.prefix, &hints).await?;
        *self
            .seen
            .hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = listed.hints();
        for skipped in &listed.skipped {
            if self.seen.first("skipped", &skipped.key) {
                tracing::warn!(
                    "object key {:?} skipped: it has {}, which object_store cannot address",
                    skipped.key,
                    skipped.why
                );
            }
        }
        Ok(listed
            .objects
            .into_iter()
            .filter(|m| {
                std::path::Path::new(m.location.as_ref())
                    .extension()
                    .is_some_and(|e| e == "chat")
                    && !m.location.parts().any(|p| p.as_ref() == ".flemma")
            })
            .map(|m| (m.location, m.e_tag))
            .collect())
    }

    /// Runs conversations until `shutdown` is cancelled: looks at the prefix, takes the
    /// lease of each ready conversation it has room for (see [`is_ready`]; or, with a
    /// [`workdir`](WorkerOptions::workdir), one whose background job finished on this machine
    /// and waits to be delivered), answers the calls a dead holder left in progress, calls
    /// `runner`, renews the lease while it runs, releases it after. On
    /// shutdown the runs in progress are told to stop (their [`Assignment::stop`]) and
    /// waited for, and their leases released. `on_finished` hears of each run that ended.
    /// With a workdir, the worker is a host of that directory's [`Machine`]: it says so on
    /// the bucket while it runs ([`Machine::keep_announced`]) and the conversations it runs
    /// keep their job journal on the bucket ([`ObjectConversation::with_machine`]).
    ///
    /// # Errors
    ///
    /// Never for one conversation (a failed run is reported to `on_finished` and the worker
    /// goes on); [`ObjectError::Request`] only if the prefix cannot be listed when the worker
    /// starts, [`ObjectError::Workdir`] if the [`workdir`](WorkerOptions::workdir)'s machine
    /// id can be neither read nor made ([`Machine::of_workdir`]).
    pub async fn run<R, F, N>(
        &self,
        runner: R,
        mut on_finished: N,
        shutdown: CancellationToken,
    ) -> Result<(), ObjectError>
    where
        R: Fn(Assignment) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send + 'static,
        N: FnMut(Finished),
    {
        // The prefix must be readable at all.
        self.conversations().await?;
        // This host, on its machine: the job journals of the conversations it runs name it.
        let machine = match &self.options.workdir {
            Some(workdir) => Some(Arc::new(Machine::of_workdir(
                &self.bucket,
                workdir,
                self.options.lease_ttl,
            )?)),
            None => None,
        };
        let announced = CancellationToken::new();
        let announcing = machine.as_ref().map(|machine| {
            let machine = Arc::clone(machine);
            let until = announced.clone();
            tokio::spawn(async move { machine.keep_announced(until).await })
        });
        let ran = self
            .serve(runner, &mut on_finished, &shutdown, machine.as_ref())
            .await;
        announced.cancel();
        if let Some(announcing) = announcing {
            let _ = announcing.await;
        }
        ran
    }

    async fn serve<R, F, N>(
        &self,
        runner: R,
        on_finished: &mut N,
        shutdown: &CancellationToken,
        machine: Option<&Arc<Machine>>,
    ) -> Result<(), ObjectError>
    where
        R: Fn(Assignment) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send + 'static,
        N: FnMut(Finished),
    {
        let runner = Arc::new(runner);
        // The version of each conversation last found with nothing to do.
        let mut idle: HashMap<ObjectPath, Option<String>> = HashMap::new();
        let mut running: HashSet<ObjectPath> = HashSet::new();
        let mut last_runs: HashMap<ObjectPath, LastRun> = HashMap::new();
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            if !shutdown.is_cancelled() && running.len() < self.options.concurrency {
                match self.conversations().await {
                    Ok(found) => {
                        for (key, e_tag) in rotate(found) {
                            if running.len() >= self.options.concurrency || shutdown.is_cancelled()
                            {
                                break;
                            }
                            if running.contains(&key)
                                || (idle
                                    .get(&key)
                                    .is_some_and(|seen| *seen == e_tag && e_tag.is_some())
                                    && !self.jobs_waiting(&key).await)
                            {
                                continue;
                            }
                            if last_runs.get(&key).is_some_and(|last| {
                                last.backs_off(e_tag.as_deref(), self.options.poll_interval)
                            }) {
                                continue;
                            }
                            match self.take(&key, shutdown, machine).await {
                                Ok(Picked::Idle) => {
                                    idle.insert(key, e_tag);
                                }
                                Ok(Picked::Busy) => {}
                                Ok(Picked::Leased(assignment, bucket)) => {
                                    idle.remove(&key);
                                    last_runs
                                        .entry(key.clone())
                                        .and_modify(|last| last.again(e_tag.as_deref()))
                                        .or_insert_with(|| LastRun::new(e_tag.clone()));
                                    running.insert(key.clone());
                                    tasks.spawn(supervise(
                                        Arc::clone(&runner),
                                        assignment,
                                        bucket,
                                        key,
                                    ));
                                }
                                Err(error) => self.not_taken(&key, &error),
                            }
                        }
                    }
                    Err(error) => tracing::warn!(%error, "cannot list the conversations"),
                }
            }
            if shutdown.is_cancelled() && running.is_empty() {
                return Ok(());
            }
            tokio::select! {
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Ok((key, finished)) = done {
                        running.remove(&key);
                        if let Some(last) = last_runs.get_mut(&key) {
                            last.ended = Some(tokio::time::Instant::now());
                        }
                        on_finished(finished);
                    }
                }
                () = tokio::time::sleep(self.options.poll_interval) => {}
                () = shutdown.cancelled(), if !shutdown.is_cancelled() => {}
            }
        }
    }

    /// Says why `key` was not taken. A key listed but not found is warned of once: it is a
    /// key `object_store` lists under another name (`/a.chat` as `a.chat`, `a.chat/` as
    /// `a.chat`), which no request of it can reach, or one deleted since the listing.
    fn not_taken(&self, key: &ObjectPath, error: &ObjectError) {
        let missing = matches!(
            error,
            ObjectError::Request {
                source: object_store::Error::NotFound { .. },
                ..
            }
        );
        if !missing {
            tracing::warn!(key = ?key.as_ref(), %error, "conversation not taken");
        } else if self.seen.first("missing", key.as_ref()) {
            tracing::warn!(
                "conversation {:?} listed but not found: a key with a leading or trailing `/` \
                 is listed under this name and cannot be read through it (or the object was \
                 deleted since); skipped",
                key.as_ref()
            );
        }
    }

    /// Whether a background job of the conversation `key` ended on this machine and its
    /// result waits to be delivered: its exit file is in the conversation's local store
    /// directory (`WORKDIR/BUCKET/FLAT/.flemma/NAME/jobs/J.exit`, removed once the Job Result
    /// is written). A job's process and files are this machine's: only a host here can
    /// deliver it. False without a workdir.
    async fn jobs_waiting(&self, key: &ObjectPath) -> bool {
        let Some(workdir) = &self.options.workdir else {
            return false;
        };
        let store_dir = crate::results::local_store_dir(&chat_path(workdir, &self.bucket, key));
        let Ok(mut entries) = tokio::fs::read_dir(store_dir.join("jobs")).await else {
            return false;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            if entry.path().extension().is_some_and(|e| e == "exit") {
                return true;
            }
        }
        false
    }

    /// Reads `key`; when it is ready, takes its lease and answers what a dead holder left.
    async fn take(
        &self,
        key: &ObjectPath,
        shutdown: &CancellationToken,
        machine: Option<&Arc<Machine>>,
    ) -> Result<Picked, ObjectError> {
        // The run's own counts, so that they can be reported for it alone.
        let bucket = self.bucket.with_own_counts();
        let mut conversation = ObjectConversation::open(&bucket, key).await?;
        if let Some(workdir) = &self.options.workdir {
            conversation = conversation.with_local_path(local_path(workdir, &bucket, key)?);
        }
        if let Some(machine) = machine {
            conversation = conversation.with_machine(Arc::clone(machine));
        }
        let text = conversation
            .snapshot()
            .await
            .map_err(|e| remote(&bucket, key, e))?
            .text;
        if !is_ready(&flemma_ast::parse(&text), self.options.runs_pending)
            && !self.jobs_waiting(key).await
        {
            return Ok(Picked::Idle);
        }
        match take_over(conversation, &self.options.holder, self.options.lease_ttl).await? {
            Taken::Leased(mut assignment) => {
                assignment.stop = shutdown.child_token();
                Ok(Picked::Leased(assignment, bucket))
            }
            Taken::Busy(_) => Ok(Picked::Busy),
        }
    }
}

/// `workdir/BUCKET/FLAT/NAME`: a directory of its own for each conversation (`FLAT` is the
/// key as one segment, `/` and `%` percent-encoded: `team%2Fa.chat`), so that the conversation's
/// directory, which its tools may write, holds no other conversation's file or store.
fn chat_path(workdir: &std::path::Path, bucket: &Bucket, key: &ObjectPath) -> std::path::PathBuf {
    let name = key.filename().unwrap_or("conversation.chat");
    workdir
        .join(bucket.name())
        .join(flat_key(key.as_ref()))
        .join(name)
}

/// `key` as one path segment: `%` and `/` percent-encoded, a long one shortened to a prefix,
/// `-` and 16 hex digits of its FNV-1a hash (within `NAME_MAX`).
fn flat_key(key: &str) -> String {
    let flat = key.replace('%', "%25").replace('/', "%2F");
    if flat.len() <= 200 {
        return flat;
    }
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut end = 160;
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash:016x}", &flat[..end])
}

/// `workdir/BUCKET/FLAT/NAME` (see the layout above), its directory made, a project of its
/// own (a [`PROJECT_MARKER`](flemma_config::PROJECT_MARKER) in it).
///
/// # Errors
///
/// [`ObjectError::Workdir`] when the directory cannot be made.
pub fn local_path(
    workdir: &std::path::Path,
    bucket: &Bucket,
    key: &ObjectPath,
) -> Result<std::path::PathBuf, ObjectError> {
    let path = chat_path(workdir, bucket, key);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ObjectError::Workdir {
            path: dir.to_owned(),
            source,
        })?;
        // The directory is the conversation's project, even inside a repository.
        let marker = dir.join(flemma_config::PROJECT_MARKER);
        if !marker.exists() {
            std::fs::write(&marker, b"").map_err(|source| ObjectError::Workdir {
                path: marker,
                source,
            })?;
        }
    }
    Ok(path)
}

/// What [`take`] found.
#[derive(Debug)]
#[non_exhaustive]
pub enum Taken {
    /// The conversation is this host's to run now.
    Leased(Assignment),
    /// Another host runs it (its lease record, when read).
    Busy(Option<LeaseRecord>),
}

/// Takes the lease of the conversation `key` for `holder` (for `ttl`; with `workdir`, the
/// conversation's local path is `workdir/BUCKET/KEY`, see [`local_path`]; with `machine`, its
/// job journal is on the bucket, see [`ObjectConversation::with_machine`]), reads the
/// conversation under it and answers the calls a dead holder left in progress: what a worker
/// does before it runs a conversation, and what `flemma run s3://…` does. The assignment's
/// `stop` is a token of its own; [`keep`] renews the lease (and [`Machine::keep_announced`]
/// says the host lives, for its jobs).
///
/// # Errors
///
/// When the bucket cannot be reached or the conversation cannot be read or written.
pub async fn take(
    bucket: &Bucket,
    key: &ObjectPath,
    holder: &str,
    ttl: Duration,
    workdir: Option<&std::path::Path>,
    machine: Option<Arc<Machine>>,
) -> Result<Taken, ObjectError> {
    let mut conversation = ObjectConversation::open(bucket, key).await?;
    if let Some(workdir) = workdir {
        conversation = conversation.with_local_path(local_path(workdir, bucket, key)?);
    }
    if let Some(machine) = machine {
        conversation = conversation.with_machine(machine);
    }
    take_over(conversation, holder, ttl).await
}

async fn take_over(
    conversation: ObjectConversation,
    holder: &str,
    ttl: Duration,
) -> Result<Taken, ObjectError> {
    let bucket = conversation.bucket().clone();
    let key = conversation.key().clone();
    let (lease, previous) = match Lease::acquire(&bucket, &key, holder, ttl).await? {
        Acquired::Held { lease, previous } => (Arc::new(lease), previous),
        Acquired::Busy(record) => return Ok(Taken::Busy(record)),
    };
    if let Some(previous) = &previous {
        tracing::info!(key = %key, holder = %previous.holder, "taking over an expired lease");
    }
    let conversation = Arc::new(conversation.with_lease(Arc::clone(&lease)));
    // The results another host wrote, where the transcript names them.
    if let Err(error) = conversation.fetch_results().await {
        let _ = lease.release().await;
        return Err(error);
    }
    let recovered = match answer_lost(&conversation).await {
        Ok(recovered) => recovered,
        Err(error) => {
            // Not run: the lease goes back.
            let _ = lease.release().await;
            return Err(remote(&bucket, &key, error));
        }
    };
    Ok(Taken::Leased(Assignment {
        url: conversation.url().to_owned(),
        conversation,
        lease,
        recovered,
        stop: CancellationToken::new(),
    }))
}

/// Reads the conversation under its lease and answers the calls left in progress.
async fn answer_lost(
    conversation: &ObjectConversation,
) -> Result<Vec<String>, flemma_core::ConversationError> {
    conversation.revalidate().await?;
    let snapshot = conversation.snapshot().await?;
    let doc = flemma_ast::parse(&snapshot.text);
    let answered =
        flemma_runtime::answer_interrupted(&doc, flemma_ast::writer::WriterOptions::default());
    if answered.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, edits): (Vec<_>, Vec<_>) = answered.into_iter().unzip();
    conversation
        .apply(snapshot.revision, &edits, flemma_core::Durability::Durable)
        .await?;
    Ok(ids)
}

/// Renews `lease` every third of its time to live until `until` is cancelled; when the lease
/// is lost (taken over after it expired, or not renewed in time), cancels `lost` and returns.
/// A renewal that fails for another reason (the bucket unreachable) is tried again at the next
/// tick; the lease's own check keeps the host from writing once too little of it is left.
pub async fn keep(lease: Arc<Lease>, until: CancellationToken, lost: CancellationToken) {
    let mut renewals = tokio::time::interval(lease.renew_every());
    renewals.tick().await;
    loop {
        tokio::select! {
            () = until.cancelled() => return,
            _ = renewals.tick() => match lease.renew().await {
                Ok(()) => {}
                Err(error @ ObjectError::LeaseLost { .. }) => {
                    tracing::warn!(lease = lease.url(), %error, "lease lost: stopping the run");
                    lost.cancel();
                    return;
                }
                Err(error) => {
                    tracing::warn!(lease = lease.url(), %error, "lease not renewed; trying again");
                }
            },
        }
    }
}

fn remote(bucket: &Bucket, key: &ObjectPath, error: flemma_core::ConversationError) -> ObjectError {
    ObjectError::Conversation {
        url: bucket.url(key),
        source: error,
    }
}

/// Starts the list at a place of its own for each worker, so that workers do not all race for
/// the same first conversation.
fn rotate<T>(mut found: Vec<T>) -> Vec<T> {
    if found.len() > 1 {
        use std::hash::{BuildHasher, Hasher};
        // A random number: the standard library's per-process hash seed.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let at = usize::try_from(random % found.len() as u64).unwrap_or(0);
        found.rotate_left(at);
    }
    found
}

/// A conversation's last run: the version it was taken at, when it ended, and how many runs
/// in a row found it at that version. A run that left the conversation as it was (its
/// provider failed, its calls are claimed by a live executor elsewhere on this machine) is not
/// run again at once: the worker waits twice the poll interval, then twice as long after each
/// such run, up to a minute, until the conversation changes.
#[derive(Debug)]
struct LastRun {
    e_tag: Option<String>,
    ended: Option<tokio::time::Instant>,
    unchanged: u32,
}

/// The longest wait before a conversation left unchanged by its runs is run again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl LastRun {
    fn new(e_tag: Option<String>) -> Self {
        Self {
            e_tag,
            ended: None,
            unchanged: 0,
        }
    }

    /// Taken again at `e_tag`.
    fn again(&mut self, e_tag: Option<&str>) {
        if self.e_tag.as_deref() == e_tag {
            self.unchanged = self.unchanged.saturating_add(1);
        } else {
            self.e_tag = e_tag.map(str::to_owned);
            self.unchanged = 0;
        }
        self.ended = None;
    }

    /// Whether a conversation now at `e_tag` waits before it is run again.
    fn backs_off(&self, e_tag: Option<&str>, poll: Duration) -> bool {
        let Some(ended) = self.ended else {
            return false;
        };
        if e_tag.is_none() || self.e_tag.as_deref() != e_tag {
            return false;
        }
        let wait = poll
            .saturating_mul(2_u32.saturating_pow(self.unchanged.saturating_add(1)))
            .min(MAX_BACKOFF);
        ended.elapsed() < wait
    }
}

enum Picked {
    Idle,
    Busy,
    Leased(Assignment, Bucket),
}

/// Runs one assignment: the runner, beside the lease's renewals; then the release.
async fn supervise<R, F>(
    runner: Arc<R>,
    assignment: Assignment,
    bucket: Bucket,
    key: ObjectPath,
) -> (ObjectPath, Finished)
where
    R: Fn(Assignment) -> F + Send + Sync + 'static,
    F: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send + 'static,
{
    let lease = Arc::clone(&assignment.lease);
    let stop = assignment.stop.clone();
    let url = assignment.url.clone();
    let recovered = assignment.recovered.len();
    let run = runner(assignment);
    let done = CancellationToken::new();
    let renewals = tokio::spawn(keep(Arc::clone(&lease), done.clone(), stop));
    let result = run.await;
    done.cancel();
    let _ = renewals.await;
    let mut error = result.err().map(|e| e.to_string());
    if let Err(released) = lease.release().await {
        tracing::warn!(%url, error = %released, "lease not released");
        error.get_or_insert_with(|| released.to_string());
    }
    (
        key,
        Finished {
            url,
            requests: bucket.requests(),
            lease_renewals: lease.renewals(),
            error,
            recovered,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended_ago(last: &mut LastRun, seconds: u64) {
        last.ended = tokio::time::Instant::now().checked_sub(Duration::from_secs(seconds));
    }

    #[test]
    fn a_conversation_its_runs_left_unchanged_waits_longer_each_time_up_to_a_minute() {
        let poll = Duration::from_secs(1);
        let mut last = LastRun::new(Some("a".into()));
        assert!(!last.backs_off(Some("a"), poll), "still running");
        ended_ago(&mut last, 0);
        assert!(last.backs_off(Some("a"), poll), "unchanged: waits 2 s");
        assert!(!last.backs_off(Some("b"), poll), "changed: at once");
        assert!(!last.backs_off(None, poll), "no version to compare");
        ended_ago(&mut last, 3);
        assert!(!last.backs_off(Some("a"), poll), "2 s passed");
        last.again(Some("a"));
        ended_ago(&mut last, 3);
        assert!(
            last.backs_off(Some("a"), poll),
            "the second unchanged run: waits 4 s"
        );
        last.again(Some("b"));
        ended_ago(&mut last, 3);
        assert!(
            !last.backs_off(Some("b"), poll),
            "changed between: back to 2 s"
        );
        for _ in 0..100 {
            last.again(Some("b"));
        }
        ended_ago(&mut last, 59);
        assert!(last.backs_off(Some("b"), poll));
        ended_ago(&mut last, 61);
        assert!(!last.backs_off(Some("b"), poll), "at most a minute");
    }
}
