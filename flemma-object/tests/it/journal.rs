//! The job journal on the bucket: the paths and texts of the files, claims and updates that
//! lose nothing when hosts race, and another machine's jobs left to it while it lives.

use std::sync::Arc;
use std::time::Duration;

use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::jobs::{JobJournal, JobRecord, JobState, Recorded};
use flemma_core::process::ProcessRef;
use flemma_object::object_store::ObjectStoreExt as _;
use flemma_object::object_store::path::Path as ObjectPath;
use flemma_object::{BucketJournal, Machine, journal_prefix};
use flemma_runtime::jobs::FileJournal;

use crate::ok;
use crate::server::bucket;

/// A journal entry as the executor writes one (from its JSON: only the executor makes them).
fn record(job: &str, machine: Option<&str>, owner: Option<ProcessRef>) -> JobRecord {
    let record = serde_json::json!({
        "job_id": job,
        "tool_id": "toolu_1",
        "tool": "bash",
        "state": "running",
        "started_at": 1_700_000_000.5,
        "owner": owner,
        "process": {"pid": 4242, "start_time": 99},
        "machine": machine,
        "input": {"command": "sleep 5"},
    });
    ok(serde_json::from_value(record))
}

/// The path `flemma-it-NAME-PID` under the temporary directory (not made: the journals make
/// it), removed when the guard is dropped.
fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("flemma-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TempDir(dir)
}

/// A directory removed with everything in it when dropped, test passed or failed.
struct TempDir(std::path::PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A process that is not running (no pid is this large).
const GONE: Option<ProcessRef> = Some(ProcessRef {
    pid: i32::MAX,
    start_time: 1,
});

/// A test's bucket, scratch directory (removed when dropped, after the rest: the last
/// field), conversation key, and the journal of that conversation kept by a host of the
/// machine `machine`.
struct Fixture {
    bucket: flemma_object::Bucket,
    key: ObjectPath,
    journal: BucketJournal,
    _local: TempDir,
}

impl Fixture {
    async fn new(name: &str, key: &str, machine: &str) -> Self {
        let bucket = bucket().await;
        let local = temp_dir(name);
        let key = ObjectPath::from(key);
        let machine = Arc::new(Machine::new(&bucket, machine, Duration::from_secs(30)));
        let journal = BucketJournal::new(&bucket, machine, &key, &local);
        Self {
            bucket,
            key,
            journal,
            _local: local,
        }
    }
}

/// An entry on the bucket is at the path, and has the text, that a file conversation's
/// journal gives it in its store directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_have_the_paths_and_texts_of_the_journal_files() {
    let bucket = bucket().await;
    let machine = Arc::new(Machine::new(&bucket, "m-one", Duration::from_secs(30)));
    let key = ObjectPath::from("team/a.chat");
    let local = temp_dir("journal-text");
    // The local store directory of `WORKDIR/BUCKET/team/a.chat`.
    let store_dir = local.join("team/.flemma/a.chat");
    let on_bucket = BucketJournal::new(&bucket, Arc::clone(&machine), &key, &store_dir);
    let in_files = FileJournal::new(&store_dir);
    let entry = record("job_ab12cd34", Some("m-one"), ProcessRef::current());
    ok(on_bucket.put(&entry).await);
    ok(in_files.put(&entry).await);

    let file = ok(std::fs::read(store_dir.join("jobs/job_ab12cd34.json")));
    let object_key = ObjectPath::from("team/.flemma/a.chat/jobs/job_ab12cd34.json");
    assert_eq!(journal_prefix(&key).as_ref(), "team/.flemma/a.chat/jobs");
    let object = ok(ok(bucket.store().get(&object_key).await).bytes().await);
    assert_eq!(
        String::from_utf8_lossy(&object),
        String::from_utf8_lossy(&file)
    );
    assert_eq!(on_bucket.get("job_ab12cd34").await, Some(entry.clone()));
    assert_eq!(on_bucket.list().await, vec![entry]);
    // The job's files stay on this machine, where the file journal keeps them.
    assert_eq!(
        on_bucket.output_path("job_ab12cd34"),
        in_files.output_path("job_ab12cd34")
    );
}

/// Of 16 hosts of one machine claiming a job whose owner died, exactly one gets it: a claim
/// is a conditional put on the version read, and a loser reads the winner's entry again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_sixteen_hosts_claiming_an_orphaned_job_exactly_one_gets_it() {
    let bucket = bucket().await;
    let local = temp_dir("journal-claim");
    for round in 0..5 {
        let key = ObjectPath::from(format!("claims/{round}.chat"));
        let machine = Arc::new(Machine::new(&bucket, "m-claims", Duration::from_secs(30)));
        let first = BucketJournal::new(&bucket, Arc::clone(&machine), &key, &local);
        ok(first
            .put(&record("job_orphan1", Some("m-claims"), GONE))
            .await);
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let journal = BucketJournal::new(&bucket, Arc::clone(&machine), &key, &local);
            let barrier = Arc::clone(&barrier);
            tasks.spawn(async move {
                barrier.wait().await;
                ok(journal.claim("job_orphan1", ProcessRef::current()).await).is_some()
            });
        }
        let won = tasks.join_all().await.into_iter().filter(|w| *w).count();
        assert_eq!(won, 1, "round {round}");
        let now = first.get("job_orphan1").await.map(|r| r.owner);
        assert_eq!(now, Some(ProcessRef::current()));
    }
}

/// Two hosts changing one entry 20 times each at once: every change is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_racing_on_one_entry_lose_no_change() {
    let fixture = Fixture::new("journal-update", "updates/a.chat", "m-updates").await;
    let journal = &fixture.journal;
    ok(journal
        .put(&record("job_count1", Some("m-updates"), None))
        .await);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let journal = journal.clone();
        tasks.spawn(async move {
            for _ in 0..20 {
                let change = Box::new(|r: &mut JobRecord| {
                    r.exit_status = Some(r.exit_status.unwrap_or(0) + 1);
                    true
                });
                ok(journal.update("job_count1", change).await);
            }
        });
    }
    tasks.join_all().await;
    let count = journal.get("job_count1").await.and_then(|r| r.exit_status);
    assert_eq!(count, Some(40));
    // A put over an entry replaces it (a conditional replace of the version read).
    let again = record("job_count1", Some("m-updates"), GONE);
    ok(journal.put(&again).await);
    assert_eq!(journal.get("job_count1").await, Some(again));
    // An entry that is not there is not made by an update.
    let none = ok(journal.update("job_absent1", Box::new(|_| true)).await);
    assert_eq!(none, None);
}

/// Another machine's job: its owner lives while that host's object has not expired, its
/// process while any host of that machine lives; withdrawn or expired, both are gone. This
/// machine's are looked up by pid; an entry that names no machine is nobody's here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_machines_processes_live_while_a_host_of_it_does() {
    let fixture = Fixture::new("journal-lives", "lives/a.chat", "m-here").await;
    let there = Machine::new(&fixture.bucket, "m-there", Duration::from_secs(2));
    let journal = &fixture.journal;
    let theirs = record("job_there1", Some("m-there"), ProcessRef::current());
    assert!(!journal.is_local(&theirs));
    assert!(
        !journal.lives(&theirs, Recorded::Owner).await,
        "not announced yet"
    );
    assert!(!journal.lives(&theirs, Recorded::Process).await);

    ok(there.announce().await);
    assert!(journal.lives(&theirs, Recorded::Owner).await);
    assert!(journal.lives(&theirs, Recorded::Process).await);
    // Another host of that machine (a process that never announced itself) is gone.
    let other_owner = record("job_there2", Some("m-there"), GONE);
    assert!(!journal.lives(&other_owner, Recorded::Owner).await);
    assert!(journal.lives(&other_owner, Recorded::Process).await);

    there.withdraw().await;
    assert!(!journal.lives(&theirs, Recorded::Owner).await, "withdrawn");
    assert!(!journal.lives(&theirs, Recorded::Process).await);

    ok(there.announce().await);
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert!(!journal.lives(&theirs, Recorded::Owner).await, "expired");
    assert!(!journal.lives(&theirs, Recorded::Process).await);

    // This machine's: by pid (this process lives; pid 4242 of start time 99 does not).
    let mine = record("job_here1", Some("m-here"), ProcessRef::current());
    assert!(journal.is_local(&mine));
    assert!(journal.lives(&mine, Recorded::Owner).await);
    assert!(!journal.lives(&mine, Recorded::Process).await);
    // No machine named: written by no shared journal, nobody's here.
    let unnamed = record("job_nowhere", None, ProcessRef::current());
    assert!(!journal.is_local(&unnamed));
    assert!(!journal.lives(&unnamed, Recorded::Owner).await);
}

/// A forged or broken object under the journal's prefix is no entry: one that does not decode,
/// one too large to read (never read into memory), one deeper than the prefix's own entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_that_are_not_entries_are_skipped() {
    use flemma_object::object_store::PutPayload;
    let fixture = Fixture::new("journal-forged", "forged/a.chat", "m-forged").await;
    let (bucket, journal) = (&fixture.bucket, &fixture.journal);
    ok(journal
        .put(&record("job_real0001", Some("m-forged"), None))
        .await);
    let prefix = journal_prefix(&fixture.key);
    let put = |name: &str, bytes: Vec<u8>| {
        let key = name.split('/').fold(prefix.clone(), ObjectPath::join);
        let bucket = bucket.clone();
        async move { ok(bucket.store().put(&key, PutPayload::from(bytes)).await) }
    };
    put("job_garbage1.json", b"{not json".to_vec()).await;
    let size = usize::try_from(flemma_object::MAX_ENTRY_BYTES).unwrap_or(usize::MAX) + 1;
    let mut huge =
        serde_json::to_vec(&record("job_huge0001", Some("m-forged"), None)).unwrap_or_default();
    huge.resize(size, b' ');
    put("job_huge0001.json", huge).await;
    put(
        "deeper/job_deep0001.json",
        ok(serde_json::to_vec(&record("job_deep0001", None, None))),
    )
    .await;
    let listed: Vec<String> = journal.list().await.into_iter().map(|r| r.job_id).collect();
    assert_eq!(listed, ["job_real0001"]);
    assert_eq!(journal.get("job_garbage1").await, None);
    assert_eq!(journal.get("job_huge0001").await, None);
    // A put of that job replaces the broken object with its entry.
    let mended = record("job_garbage1", Some("m-forged"), None);
    ok(journal.put(&mended).await);
    assert_eq!(journal.get("job_garbage1").await, Some(mended));
}

/// An executor on an object conversation, as a host of machine `m-here`, with a job of
/// machine `m-there` (whose owner died) in the journal on the bucket: while a host of
/// `m-there` lives, opening the conversation leaves the job to it and `flemma.jobs.status`
/// says it runs; once none does, the next executor that opens it answers the job lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_leaves_a_live_machines_job_and_answers_it_lost_once_it_is_gone() {
    use flemma_core::Conversation as _;
    use flemma_object::ObjectConversation;
    use flemma_runtime::{Executor, ToolRegistry, jobs::JobsStatus};

    let bucket = bucket().await;
    let local = temp_dir("journal-executor");
    let key = ObjectPath::from("exec/a.chat");
    let here = Arc::new(Machine::new(&bucket, "m-here", Duration::from_secs(30)));
    let there = Machine::new(&bucket, "m-there", Duration::from_secs(30));
    ok(there.announce().await);
    let text = "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n\
        @You:\nRun it.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n\
        ```json\n{\"command\": \"sleep 5\"}\n```\n\n@You:\n\
        **Tool Result:** `toolu_1` (job=job_there001)\n```\nRunning as a background job.\n```\n\n\
        @Assistant:\n**Tool Use:** `flemma.jobs.status` (`toolu_s1`)\n\
        ```json\n{\"job_id\": \"job_there001\"}\n```\n";
    ok(ObjectConversation::create(&bucket, &key, text).await);
    let open = || async {
        let conversation = ok(ObjectConversation::open(&bucket, &key).await)
            .with_local_path(local.join("a.chat"))
            .with_machine(Arc::clone(&here));
        let registry = ToolRegistry::new();
        registry.register(ok(JobsStatus::new()));
        let conversation = Arc::new(conversation);
        let executor = Executor::builder(conversation.clone(), registry).build();
        (conversation, executor)
    };
    let store_dir = local.join(".flemma/a.chat");
    let journal = BucketJournal::new(&bucket, Arc::clone(&here), &key, &store_dir);
    ok(journal
        .put(&record("job_there001", Some("m-there"), GONE))
        .await);

    let (conversation, executor) = open().await;
    ok(executor.cycle().await);
    let after = ok(conversation.snapshot().await).text;
    assert!(after.contains("\"status\":\"running\""), "{after}");
    assert!(!after.contains("Job lost"), "{after}");
    assert_eq!(
        journal.get("job_there001").await.map(|r| r.state),
        Some(JobState::Running)
    );

    there.withdraw().await;
    let (conversation, executor) = open().await;
    ok(executor.cycle().await);
    let after = ok(conversation.snapshot().await).text;
    assert!(
        after.contains("Job lost: session ended before completion."),
        "{after}"
    );
    assert!(after.contains("error job=job_there001"), "{after}");
    assert_eq!(
        journal.get("job_there001").await.map(|r| r.state),
        Some(JobState::Lost)
    );
}
