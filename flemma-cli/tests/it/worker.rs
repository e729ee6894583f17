//! `flemma worker` and `flemma run s3://…` against moto's S3 server on 127.0.0.1: a fleet of
//! worker processes sharing 100 conversations, one of them killed by SIGKILL midway.

#[path = "../../../flemma-object/tests/it/server.rs"]
mod server;

#[path = "../../benches/support/mock_model.rs"]
mod mock_model;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flemma::object::object_store::ObjectStoreExt as _;
use flemma::object::{Bucket, ObjectConversation};
use futures_util::StreamExt as _;

use crate::scratch::Scratch;

/// How many conversations the fleet runs (`FLEMMA_FLEET_CONVERSATIONS` for fewer or more).
fn conversations() -> usize {
    std::env::var("FLEMMA_FLEET_CONVERSATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}
const TURNS: usize = 3;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> Scratch {
    Scratch::new(format!("flemma-worker-{name}-{}", std::process::id()))
}

/// The text of `key`, or `None` when it does not exist.
async fn text(bucket: &Bucket, key: &str) -> Option<String> {
    let got = bucket.store().get(&key.into()).await.ok()?;
    Some(String::from_utf8(got.bytes().await.ok()?.to_vec()).unwrap())
}

/// A `flemma` command with the bucket's client and the mock model in its environment.
fn flemma(endpoint: &str, model: &str, dir: &Path) -> Command {
    let mut command = crate::flemma_command();
    command
        .current_dir(dir)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("FLEMMA_BASE_URL", model)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        // The ledger of placements in the test's own directory, not the user's state.
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null());
    command
}

/// The local store directory of the conversation `key` in the working directory `workdir`
/// (`flemma::object::local_path`'s directory, `.flemma/NAME`).
fn local_store(workdir: &Path, bucket: &Bucket, key: &str) -> PathBuf {
    let chat = flemma::object::local_path(workdir, bucket, &key.into()).unwrap();
    chat.parent()
        .unwrap()
        .join(".flemma")
        .join(chat.file_name().unwrap())
}

fn wait_until(what: &str, limit: Duration, done: impl FnMut() -> bool) {
    assert!(wait_for(limit, done), "{what}: not within {limit:?}");
}

/// Whether `done` became true within `limit`.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

/// Whether a conversation is finished: three results, then the model's last answer (and the
/// empty `@You:` the session leaves for the next prompt).
fn finished(text: &str) -> bool {
    let doc = flemma::ast::parse(text);
    let results = doc
        .messages
        .iter()
        .flat_map(flemma::ast::Message::tool_results)
        .count();
    results == TURNS && text.ends_with("@Assistant:\nIt said hi.\n\n@You:\n")
}

/// The worker processes, killed if the test ends before they stop (a failed assertion).
struct Fleet(Vec<Child>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn terminate(child: &Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// The sum of the object requests the workers reported for their runs, and the number of runs.
fn reported_requests(logs: &[PathBuf]) -> Reported {
    let mut reported = Reported::default();
    for log in logs {
        for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
            if let Some(rest) = line.strip_prefix("worker: s3://")
                && let Some((_, counts)) = rest.split_once(" (")
                && let Some(n) = counts.split(' ').next()
            {
                reported.requests += n.parse::<u64>().unwrap();
                let renewals = counts
                    .split_once(" put (")
                    .and_then(|(_, rest)| rest.split(' ').next())
                    .unwrap_or_else(|| panic!("no lease renewals in {line:?}"));
                reported.renewals += renewals.parse::<u64>().unwrap();
                reported.runs += 1;
            }
        }
    }
    reported
}

/// The figures of the book's "Running on many machines", shown with --nocapture.
#[allow(
    clippy::print_stderr,
    clippy::cast_precision_loss,
    reason = "the figures, shown with --nocapture"
)]
fn print_fleet_figures(
    conversations: usize,
    turns: u64,
    counted: &str,
    wall: Duration,
    reported: &Reported,
) {
    let Reported {
        requests,
        renewals,
        runs,
    } = reported;
    eprintln!(
        "fleet: {conversations} conversations, {turns} model turns, {counted} in {:.1} s; \
         {requests} object requests in {runs} reported runs ({:.2} per model turn; {renewals} \
         of them lease renewals, {:.2} per model turn without them)",
        wall.as_secs_f64(),
        *requests as f64 / turns as f64,
        (requests - renewals) as f64 / turns as f64
    );
}

/// What the workers' logs say of their runs.
#[derive(Debug, Default)]
struct Reported {
    /// Object requests, lease renewals included.
    requests: u64,
    /// Of them, the lease renewals: one per second of a run (the tests' 3 s leases), however
    /// much it does, so more on a loaded machine.
    renewals: u64,
    runs: u64,
}

/// What a fleet's run left: the conversations' texts, the counter's labels, the workers' logs.
struct Ran {
    texts: BTreeMap<String, String>,
    counter: String,
    logs: Vec<PathBuf>,
    wall: Duration,
    killed_at: usize,
    /// The holder name of the worker killed by SIGKILL (the first line of its log).
    killed: String,
    model_turns: usize,
}

/// The holder name a worker's log starts with (`worker HOLDER: running …`).
fn holder_in_log(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .strip_prefix("worker ")
        .and_then(|rest| rest.split(": running").next())
        .unwrap_or_else(|| panic!("no holder in {}: {first:?}", log.display()))
        .to_owned()
}

/// Runs the fleet: four workers, one killed by SIGKILL a third of the way and a fifth started,
/// until every conversation is finished; then SIGTERM stops the rest, each exiting 0.
fn run_fleet(
    rt: &tokio::runtime::Runtime,
    bucket: &Bucket,
    endpoint: &str,
    conversations: usize,
    dir: &Path,
) -> Ran {
    let endpoint = endpoint.to_owned();
    let python = root().join("tests/object/.venv/bin/python");
    let script = root().join("tests/object/counter.py");
    let command = format!(
        "{} {} {endpoint} {} counter.log {{tag}}-{{n}}",
        python.display(),
        script.display(),
        bucket.name()
    );
    let model = mock_model::MockModel::start_with_command(TURNS, &command).unwrap();
    let store = format!("s3://{}/fleet", bucket.name());
    let mut logs = Vec::new();
    let mut spawn = |n: usize| -> Child {
        let log = dir.join(format!("worker{n}.log"));
        let child = flemma(&endpoint, &model.base_url(), dir)
            .args(["worker", "--store", &store, "--concurrency", "4"])
            .args(["--lease-seconds", "3", "--poll-seconds", "0.2"])
            .args(["--provider", "anthropic", "--approve", "all"])
            .args(["--set", "sandbox.enabled=false"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        logs.push(log);
        child
    };
    let labels = || {
        rt.block_on(text(bucket, "counter.log"))
            .map_or(0, |t| t.lines().count())
    };
    let started = Instant::now();
    let mut fleet = Fleet((0..4).map(&mut spawn).collect());
    wait_until("a third of the calls", Duration::from_secs(120), || {
        labels() >= conversations * TURNS / 3
    });
    let killed = holder_in_log(&dir.join("worker0.log"));
    fleet.0[0].kill().unwrap();
    assert!(!fleet.0[0].wait().unwrap().success(), "killed");
    let killed_at = labels();
    fleet.0.push(spawn(4));
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let all_finished = wait_for(Duration::from_secs(240), || {
        for i in 0..conversations {
            let key = format!("fleet/team/c{i:03}.chat");
            if texts.get(&key).is_some_and(|t| finished(t)) {
                continue;
            }
            if let Some(t) = rt.block_on(text(bucket, &key)) {
                texts.insert(key, t);
            }
        }
        texts.len() == conversations && texts.values().all(|t| finished(t))
    });
    if !all_finished {
        let unfinished: Vec<_> = texts.iter().filter(|(_, t)| !finished(t)).collect();
        panic!(
            "{} conversations unfinished; the first: {:?}",
            unfinished.len(),
            unfinished.first()
        );
    }
    let wall = started.elapsed();
    for worker in &fleet.0[1..] {
        terminate(worker);
    }
    for worker in &mut fleet.0[1..] {
        let status = worker.wait().unwrap();
        assert!(
            status.success(),
            "a worker stopped by SIGTERM exits 0: {status}"
        );
    }
    Ran {
        texts,
        counter: rt.block_on(text(bucket, "counter.log")).unwrap(),
        logs,
        wall,
        killed_at,
        killed,
        model_turns: model.requests(),
    }
}

/// Four workers share 100 conversations of three tool turns each (a call appends its label
/// to one counter object by compare-and-swap); one worker is killed by SIGKILL a third of the
/// way and a fifth started. At the end every conversation is finished and `flemma check`
/// clean, no call ran twice, every call answered with a success ran exactly once, a call
/// answered as lost (its worker died during it) ran at most once, every lease is released,
/// and the runs made at most 10 object requests per model turn.
#[test]
fn a_fleet_of_workers_one_killed_runs_every_conversation_and_every_call_once() {
    let conversations = conversations();
    let rt = runtime();
    // A server of its own: the fleet's thousands of requests would slow the other tests'.
    let own = server::start_own();
    let bucket = rt.block_on(server::bucket_on(&own));
    rt.block_on(async {
        for i in 0..conversations {
            let key = format!("fleet/team/c{i:03}.chat").into();
            let text = format!("@You:\n[conversation c{i:03}] Count, three times.\n");
            ObjectConversation::create(&bucket, &key, text)
                .await
                .unwrap();
        }
    });
    let dir = scratch("fleet");
    let ran = run_fleet(&rt, &bucket, &own.endpoint, conversations, &dir);

    // Every call ran once: no label twice; a success's label once; a lost call's at most once.
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for label in ran.counter.lines() {
        *runs.entry(label).or_default() += 1;
    }
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "calls that ran more than once: {twice:?}");
    assert!(
        runs.len() <= conversations * TURNS,
        "labels that are no call's: {}",
        runs.len()
    );
    let mut lost = 0;
    for (i, (key, text)) in ran.texts.iter().enumerate() {
        let doc = flemma::ast::parse(text);
        let results = doc
            .messages
            .iter()
            .flat_map(flemma::ast::Message::tool_results);
        for (n, result) in results.enumerate() {
            let label = format!("c{i:03}-{}", n + 1);
            let ran = runs.get(label.as_str()).copied().unwrap_or(0);
            if result.status == Some(flemma::ast::ToolStatus::Error) {
                assert!(
                    result.content.contains("Tool execution lost"),
                    "{key}: an error other than a lost call: {}",
                    result.content
                );
                lost += 1;
            } else {
                assert_eq!(ran, 1, "{key}: {label} succeeded but ran {ran} times");
            }
        }
        let file = dir.join(format!("c{i:03}.chat"));
        std::fs::write(&file, text).unwrap();
        let check = crate::flemma_command()
            .arg("check")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{key}: flemma check: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    // No lease is left held, but by the killed worker: killed after a conversation's last
    // write and before its release, it leaves the lease of a finished conversation, which no
    // worker takes again (it is not ready); the lease has expired, which is all it can do.
    rt.block_on(async {
        for key in ran.texts.keys() {
            let record = flemma::object::read_lease(&bucket, &key.as_str().into())
                .await
                .unwrap()
                .unwrap();
            assert!(
                record.released || record.holder == ran.killed,
                "{key}: lease still held by {} (the killed worker: {})",
                record.holder,
                ran.killed
            );
        }
    });
    let reported = reported_requests(&ran.logs);
    let turns = u64::try_from(ran.model_turns).unwrap();
    // What the runs did, without the lease's renewals: those follow the time a run takes (a
    // loaded machine's runs took 4,181 requests in all, 10.5 per turn, where an idle one's
    // take 7.5), not what it does.
    assert!(
        reported.requests - reported.renewals <= 10 * turns,
        "{reported:?} for {turns} model turns"
    );
    let counted = format!(
        "{} calls counted ({lost} answered as lost; {} counted when a worker was killed)",
        runs.len(),
        ran.killed_at
    );
    print_fleet_figures(conversations, turns, &counted, ran.wall, &reported);
}

/// One test's bucket on the shared server, and its scratch directory (removed at the end,
/// after the rest: the last field).
struct Env {
    rt: tokio::runtime::Runtime,
    bucket: Bucket,
    endpoint: String,
    dir: Scratch,
}

impl Env {
    fn new(name: &str) -> Self {
        let rt = runtime();
        let bucket = rt.block_on(server::bucket());
        Self {
            rt,
            bucket,
            endpoint: server::server().endpoint.clone(),
            dir: scratch(name),
        }
    }

    fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket.name())
    }

    fn create(&self, key: &str, text: &str) {
        self.rt
            .block_on(ObjectConversation::create(&self.bucket, &key.into(), text))
            .unwrap();
    }

    fn text(&self, key: &str) -> Option<String> {
        self.rt.block_on(text(&self.bucket, key))
    }

    fn text_of(&self, key: &str) -> String {
        self.text(key).unwrap_or_else(|| panic!("{key} is missing"))
    }

    fn lease(&self, key: &str) -> flemma::object::LeaseRecord {
        self.rt
            .block_on(flemma::object::read_lease(&self.bucket, &key.into()))
            .unwrap()
            .unwrap_or_else(|| panic!("{key} has no lease"))
    }

    /// `flemma` in the scratch directory, with the bucket's client and `model`.
    fn flemma(&self, model: &mock_model::MockModel) -> Command {
        flemma(&self.endpoint, &model.base_url(), &self.dir)
    }

    /// `flemma worker` on `prefix` through `endpoint` (leases of `lease_seconds`, a look every
    /// 0.2 s, calls approved as `approve` says, no sandbox), its output discarded; the caller
    /// adds what else it needs.
    fn worker_command(
        &self,
        endpoint: &str,
        model: &mock_model::MockModel,
        prefix: &str,
        lease_seconds: &str,
        approve: &str,
    ) -> Command {
        let mut command = flemma(endpoint, &model.base_url(), &self.dir);
        command
            .args(["worker", "--store", &self.url(prefix)])
            .args(["--lease-seconds", lease_seconds, "--poll-seconds", "0.2"])
            .args(["--approve", approve, "--set", "sandbox.enabled=false"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    /// [`worker_command`](Self::worker_command) with every call approved, started.
    fn worker(&self, model: &mock_model::MockModel, prefix: &str, lease_seconds: &str) -> Child {
        self.worker_command(&self.endpoint, model, prefix, lease_seconds, "all")
            .spawn()
            .unwrap()
    }
}

/// `flemma run s3://…` refuses what it cannot do before it touches the bucket's conversation:
/// a bad URL and `--output` are usage errors (exit 2); a conversation another live host holds
/// is left alone (exit 1, the holder named, the text and the lease untouched).
#[test]
fn flemma_run_of_an_object_refuses_bad_urls_output_files_and_held_conversations() {
    let env = Env::new("run-refusals");
    let model = mock_model::MockModel::start(1).unwrap();
    let run = |args: &[&str]| {
        env.flemma(&model)
            .arg("run")
            .args(args)
            .args(["--provider", "anthropic", "--approve", "all"])
            .output()
            .unwrap()
    };
    for bad in ["s3:///x.chat", "s3://chats/a/../b.chat"] {
        let out = run(&[bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
    }
    // The commands that read files say so, rather than that no such file exists.
    let out = env
        .flemma(&model)
        .args(["check", "s3://chats/a.chat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is an object's URL: `run`"),
        "{out:?}"
    );
    let key = "held/a.chat";
    let url = env.url(key);
    let out = run(&[&url, "--output", "x.chat"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--output is for files"),
        "{out:?}"
    );
    let text = "@You:\nhello\n";
    env.create(key, text);
    let acquired = env.rt.block_on(flemma::object::Lease::acquire(
        &env.bucket,
        &key.into(),
        "elsewhere",
        Duration::from_secs(60),
    ));
    let flemma::object::Acquired::Held { lease, .. } = acquired.unwrap() else {
        panic!("the lease is free");
    };
    let out = run(&[&url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is being run by elsewhere"),
        "{out:?}"
    );
    assert_eq!(model.requests(), 0, "nothing was sent");
    assert_eq!(env.text_of(key), text);
    let record = env.lease(key);
    assert!(
        record.holder == "elsewhere" && !record.released,
        "{record:?}"
    );
    env.rt.block_on(lease.release()).unwrap();
    // An object that is not UTF-8 text is refused before anything runs, and its lease (taken
    // before it was read) is not left held.
    let binary = "held/binary.chat";
    env.rt
        .block_on(
            env.bucket
                .store()
                .put(&binary.into(), b"@You:\nhi \xff\xfe\n".to_vec().into()),
        )
        .unwrap();
    let out = run(&[&env.url(binary)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not UTF-8"),
        "{out:?}"
    );
    assert_eq!(model.requests(), 0, "nothing was sent");
    assert!(
        env.rt
            .block_on(flemma::object::read_lease(&env.bucket, &binary.into()))
            .unwrap()
            .is_none_or(|record| record.released),
        "a lease is left held"
    );
}

/// A result the store keeps (a command's output too long for the transcript, here larger
/// than one put, so copied in parts) is copied to the bucket beside the conversation, under `.flemma/NAME/`, by the time the transcript naming it
/// is; a host that takes the conversation later without the file (another machine) gets it
/// back at the path the transcript names. The usage log goes the same way.
#[test]
fn a_stored_result_travels_with_its_conversation() {
    let env = Env::new("run-results");
    // 10.9 MB: more than one put's worth, so it goes up in parts.
    let model = mock_model::MockModel::start_with_command(1, "seq 1 1500000").unwrap();
    let key = "results/long.chat";
    let url = env.url(key);
    let result = "tool_bash_toolu_mock_1.txt";
    let on_bucket = format!("results/.flemma/long.chat/{result}");
    env.create(key, "@You:\nCount far.\n");
    let run = || {
        env.flemma(&model)
            .args(["run", &url, "--provider", "anthropic", "--approve", "all"])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{out:?}");
    let local = local_store(&env.dir, &env.bucket, key).join(result);
    let full = std::fs::read_to_string(&local).unwrap();
    assert_eq!(full.lines().count(), 1_500_000);
    let text = env.text_of(key);
    assert!(
        text.contains(&local.display().to_string()),
        "the transcript names the stored result: {text}"
    );
    assert_eq!(
        env.text_of(&on_bucket),
        full,
        "the bucket holds the whole result"
    );
    // The conversation's usage log travels with it too: one line per request.
    let usage_key = "results/.flemma/long.chat/usage.jsonl";
    let first_log = env.text_of(usage_key);
    assert_eq!(first_log.lines().count(), 2, "{first_log}");

    // Another machine: the same working directory, without the file.
    std::fs::remove_dir_all(env.dir.join(env.bucket.name())).unwrap();
    let next = format!("{text}Thanks.\n");
    env.rt
        .block_on(env.bucket.store().put(&key.into(), next.into()))
        .unwrap();
    let out = run();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&local).unwrap(),
        full,
        "copied back"
    );
    // The log came back with it, and the second run's requests were added to it: `flemma
    // usage` anywhere totals every run.
    let log = env.text_of(usage_key);
    assert!(log.starts_with(&first_log), "{log}");
    assert!(log.lines().count() > 2, "{log}");
    let left: Vec<_> = std::fs::read_dir(local.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    // `flemma store path` names the result where it is kept: on the bucket.
    let out = env
        .flemma(&model)
        .args([
            "store",
            "path",
            &url,
            "--tool",
            "bash",
            "--id",
            "toolu_mock_1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}\n", env.url(&on_bucket))
    );
}

/// SIGTERM stops a worker in the middle of a call: the call is cancelled and answered as an
/// error (never a success), the transcript put, the lease released, exit 0.
#[test]
fn a_worker_stopped_by_sigterm_mid_call_answers_it_and_releases_the_lease() {
    let env = Env::new("worker-sigterm");
    let model = mock_model::MockModel::start_with_command(1, "sleep 30").unwrap();
    let key = "stop/slow.chat";
    env.create(key, "@You:\nWait a while.\n");
    let mut fleet = Fleet(vec![env.worker(&model, "stop", "3")]);
    wait_until("the call is running", Duration::from_secs(30), || {
        env.text(key)
            .is_some_and(|t| t.contains("**Tool Result:** `toolu_mock_1`"))
    });
    // Past a renewal, so the lease is the worker's own renewed one.
    std::thread::sleep(Duration::from_millis(1200));
    let stopped = Instant::now();
    terminate(&fleet.0[0]);
    let status = fleet.0[0].wait().unwrap();
    assert!(status.success(), "{status}");
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    let text = env.text_of(key);
    let doc = flemma::ast::parse(&text);
    let results: Vec<_> = doc
        .messages
        .iter()
        .flat_map(flemma::ast::Message::tool_results)
        .collect();
    assert_eq!(results.len(), 1, "{text}");
    assert_eq!(
        results[0].status,
        Some(flemma::ast::ToolStatus::Error),
        "a cancelled call is an error: {text}"
    );
    assert!(env.lease(key).released);
}

/// A test's bucket with the conversation `key`, whose model asks for one background job that
/// runs until the flag file (returned) is made, then says `finished-job`.
fn with_a_background_job(name: &str, key: &str) -> (Env, PathBuf, mock_model::MockModel) {
    let env = Env::new(name);
    let flag = env.dir.join("go");
    let command = format!(
        "while [ ! -e {} ]; do sleep 0.1; done; echo finished-job",
        flag.display()
    );
    let model = mock_model::MockModel::start_in_background(1, &command).unwrap();
    env.create(key, "@You:\nRun it in the background.\n");
    (env, flag, model)
}

/// A background job outlives the worker that started it: the worker is killed (SIGKILL) while
/// its run waits for the job, the job's process goes on and finishes, and the next worker on
/// the same machine (the same `--workdir`) takes the conversation, though its text says
/// nothing is to be done, because the job left its exit file on this machine: the Job Result
/// is delivered (a success, not a lost job) and the model answered.
#[test]
fn a_job_whose_worker_died_is_delivered_by_the_next_worker_on_the_machine() {
    let key = "jobs/long.chat";
    let (env, flag, model) = with_a_background_job("worker-job", key);
    let worker = |n: usize| {
        env.worker_command(&env.endpoint, &model, "jobs", "2", "all")
            .arg("-v")
            .stderr(std::fs::File::create(env.dir.join(format!("worker{n}.log"))).unwrap())
            .spawn()
            .unwrap()
    };
    let mut fleet = Fleet(vec![worker(1)]);
    // The job runs, and the run waits for it with nothing else to do.
    wait_until("the run waits for its job", Duration::from_secs(30), || {
        env.text(key)
            .is_some_and(|t| t.contains("(job=job_") && t.ends_with("It said hi.\n\n@You:\n"))
    });
    fleet.0[0].kill().unwrap();
    let _ = fleet.0[0].wait();
    std::fs::write(&flag, "").unwrap();
    fleet.0.push(worker(2));
    let delivered = wait_for(Duration::from_secs(30), || {
        env.text(key)
            .is_some_and(|t| t.contains("**Job Result:**") && t.ends_with("It said hi.\n\n@You:\n"))
    });
    if !delivered {
        // What each worker said, and what the journal holds.
        let log = |n: usize| {
            std::fs::read_to_string(env.dir.join(format!("worker{n}.log"))).unwrap_or_default()
        };
        let jobs = local_store(&env.dir, &env.bucket, key).join("jobs");
        let journal: Vec<_> = std::fs::read_dir(&jobs)
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .map(|e| {
                        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                        format!("{}: {text}", e.file_name().to_string_lossy())
                    })
                    .collect()
            })
            .unwrap_or_default();
        panic!(
            "the Job Result was not delivered within 60 s\n--- transcript\n{:?}\n--- worker 1\n{}\n--- worker 2\n{}\n--- journal\n{journal:#?}",
            env.text(key),
            log(1),
            log(2)
        );
    }
    let text = env.text_of(key);
    assert!(text.contains("finished-job"), "{text}");
    assert!(!text.contains("Job lost"), "{text}");
    terminate(&fleet.0[1]);
    assert!(fleet.0[1].wait().unwrap().success());
    assert!(env.lease(key).released);
}

/// Two machines (two working directories) and a background job of the first: its journal
/// entry, on the bucket, names the first machine; the test's flag file ends the job.
struct TwoMachines {
    env: Env,
    model: mock_model::MockModel,
    flag: PathBuf,
    /// The second machine's working directory.
    b: PathBuf,
    key: &'static str,
}

impl TwoMachines {
    /// A worker of machine A starts the job and is killed (SIGKILL) while its run waits for
    /// it; the job's process goes on.
    fn with_a_job_whose_worker_died(name: &str) -> Self {
        let key = "two/long.chat";
        let (env, flag, model) = with_a_background_job(name, key);
        let b = env.dir.join("machine-b");
        std::fs::create_dir_all(&b).unwrap();
        let machines = Self {
            env,
            model,
            flag,
            b,
            key,
        };
        let mut first = Fleet(vec![machines.worker_on(None, "two", 1)]);
        wait_until("the run waits for its job", Duration::from_secs(30), || {
            machines
                .env
                .text(key)
                .is_some_and(|t| t.contains("(job=job_") && t.ends_with("It said hi.\n\n@You:\n"))
        });
        first.0[0].kill().unwrap();
        let _ = first.0[0].wait();
        machines
    }

    /// A worker of `prefix` on machine A (`None`) or on the machine whose workdir is given,
    /// logging to `worker{n}.log`.
    fn worker_on(&self, workdir: Option<&Path>, prefix: &str, n: usize) -> Child {
        let mut command =
            self.env
                .worker_command(&self.env.endpoint, &self.model, prefix, "2", "all");
        if let Some(workdir) = workdir {
            command.arg("--workdir").arg(workdir);
        }
        command
            .arg("-v")
            .stderr(std::fs::File::create(self.env.dir.join(format!("worker{n}.log"))).unwrap())
            .spawn()
            .unwrap()
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for n in 1..=4 {
            let log = std::fs::read_to_string(self.env.dir.join(format!("worker{n}.log")))
                .unwrap_or_default();
            out.push_str("--- worker ");
            out.push_str(&n.to_string());
            out.push('\n');
            out.push_str(&log);
        }
        out
    }

    /// The user asks something more: the conversation is ready for any worker.
    fn user_asks(&self) {
        let text = self.env.text_of(self.key);
        let key = self.key.into();
        let put = self.env.bucket.store().put(
            &key,
            flemma::object::object_store::PutPayload::from(format!("{text}Is it done?\n")),
        );
        self.env.rt.block_on(put).unwrap();
    }

    /// The objects under `prefix`, each with its JSON (`null` when it is not JSON).
    fn objects(
        &self,
        prefix: &flemma::object::object_store::path::Path,
    ) -> Vec<(String, serde_json::Value)> {
        let store = self.env.bucket.store();
        let found: Vec<_> = self
            .env
            .rt
            .block_on(futures_util::TryStreamExt::try_collect::<Vec<_>>(
                store.list(Some(prefix)),
            ))
            .unwrap();
        found
            .iter()
            .filter_map(|meta| {
                let got = self.env.rt.block_on(store.get(&meta.location)).ok()?;
                let bytes = self.env.rt.block_on(got.bytes()).unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or_default();
                Some((meta.location.to_string(), json))
            })
            .collect()
    }

    /// The job's journal entry on the bucket.
    fn entry(&self) -> serde_json::Value {
        let mut found = self.objects(&flemma::object::journal_prefix(&self.key.into()));
        assert_eq!(found.len(), 1, "{found:?}");
        found.remove(0).1
    }

    /// Whether a host of machine `id` has an object on the bucket that has not expired.
    fn machine_lives(&self, id: &str) -> bool {
        let prefix = flemma::object::object_store::path::Path::from(format!(
            "{}/{id}",
            flemma::object::HOSTS_PREFIX
        ));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        self.objects(&prefix).iter().any(|(_, host)| {
            host["expires_at"]
                .as_f64()
                .is_some_and(|expires| expires > now)
        })
    }

    fn machine_a(&self) -> String {
        std::fs::read_to_string(self.env.dir.join(".flemma/machine-id"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Machine A's files of the job (`.out`, `.exit`) still there.
    fn files_on_a(&self) -> Vec<String> {
        let jobs = local_store(&self.env.dir, &self.env.bucket, self.key).join("jobs");
        std::fs::read_dir(jobs)
            .map(|dir| {
                dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The job journal on the bucket: machine A's worker dies while its job runs; another host of
/// machine A lives (a worker of another prefix). A worker of machine B runs the conversation
/// when the user asks more: it finds the job in the journal on the bucket, naming machine A,
/// and leaves it (not lost: A lives). When the job ends, a worker of machine A delivers its
/// Job Result, a success.
#[test]
fn another_machines_job_is_left_to_it_while_it_lives_and_delivered_there() {
    let two = TwoMachines::with_a_job_whose_worker_died("two-machines-live");
    let entry = two.entry();
    assert_eq!(entry["machine"].as_str(), Some(two.machine_a().as_str()));
    assert_eq!(entry["state"].as_str(), Some("running"));
    // Machine A lives: a host of it, which runs nothing of this prefix.
    let mut fleet = Fleet(vec![two.worker_on(None, "elsewhere", 2)]);
    two.user_asks();
    fleet.0.push(two.worker_on(Some(&two.b), "two", 3));
    let answered = wait_for(Duration::from_secs(60), || {
        two.env
            .text(two.key)
            .is_some_and(|t| t.ends_with("Is it done?\n\n@Assistant:\nIt said hi.\n\n@You:\n"))
    });
    let text = two.env.text_of(two.key);
    assert!(answered, "machine B did not answer\n{text}\n{}", two.logs());
    assert!(!text.contains("Job lost"), "{text}\n{}", two.logs());
    assert!(!text.contains("**Job Result:**"), "{text}");
    assert!(two.machine_lives(&two.machine_a()));
    // The job ends; machine A's worker of the prefix delivers it.
    std::fs::write(&two.flag, "").unwrap();
    fleet.0.push(two.worker_on(None, "two", 4));
    let delivered = wait_for(Duration::from_secs(60), || {
        two.env
            .text(two.key)
            .is_some_and(|t| t.contains("**Job Result:**"))
    });
    let text = two.env.text_of(two.key);
    assert!(delivered, "not delivered\n{text}\n{}", two.logs());
    assert!(text.contains("finished-job"), "{text}");
    assert!(!text.contains("Job lost"), "{text}");
    // The entry is marked once the Job Result is in the transcript.
    wait_until(
        "the entry marked delivered",
        Duration::from_secs(30),
        || two.entry()["state"].as_str() == Some("delivered"),
    );
    for worker in &fleet.0 {
        terminate(worker);
    }
    for worker in &mut fleet.0 {
        assert!(worker.wait().unwrap().success());
    }
    assert!(two.env.lease(two.key).released);
    // Every host withdrew its object when it stopped; the killed one's has expired.
    assert!(!two.machine_lives(&two.machine_a()), "{}", two.logs());
}

/// The job journal on the bucket: machine A's only worker dies while its job runs. Once its
/// host object has expired, a worker of machine B that runs the conversation answers the job
/// lost (its output is on a machine with no host). When the job's process then ends on A and
/// a worker of A starts, nothing more is written: the job was answered, its files there are
/// removed.
#[test]
fn another_machines_job_is_answered_lost_once_no_host_of_it_lives() {
    let two = TwoMachines::with_a_job_whose_worker_died("two-machines-gone");
    wait_until(
        "machine A's host object expired",
        Duration::from_secs(30),
        || !two.machine_lives(&two.machine_a()),
    );
    two.user_asks();
    let mut fleet = Fleet(vec![two.worker_on(Some(&two.b), "two", 3)]);
    let answered = wait_for(Duration::from_secs(60), || {
        two.env
            .text(two.key)
            .is_some_and(|t| t.contains("Job lost") && t.ends_with("It said hi.\n\n@You:\n"))
    });
    let text = two.env.text_of(two.key);
    assert!(answered, "not answered lost\n{text}\n{}", two.logs());
    assert!(text.contains("error job=job_"), "{text}");
    wait_until("the entry marked lost", Duration::from_secs(30), || {
        two.entry()["state"].as_str() == Some("lost")
    });
    // The job's process ends on A; a worker of A takes the conversation for its exit file,
    // finds the job answered, and removes its files.
    std::fs::write(&two.flag, "").unwrap();
    wait_until("the job's exit file", Duration::from_secs(30), || {
        two.files_on_a()
            .iter()
            .any(|f| Path::new(f).extension().is_some_and(|e| e == "exit"))
    });
    fleet.0.push(two.worker_on(None, "two", 4));
    wait_until(
        "machine A's files of the job removed",
        Duration::from_secs(60),
        || two.files_on_a().is_empty(),
    );
    assert_eq!(two.env.text_of(two.key), text, "nothing more written");
    for worker in &fleet.0 {
        terminate(worker);
    }
    for worker in &mut fleet.0 {
        assert!(worker.wait().unwrap().success());
    }
}

/// A TCP proxy to the S3 server on 127.0.0.1 whose link can be cut (every connection shut,
/// new ones closed at once) and restored: a network partition between one host and the bucket.
struct Partition {
    address: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Partition {
    fn to(endpoint: &str) -> Self {
        use std::sync::atomic::Ordering;
        let target: std::net::SocketAddr = endpoint.trim_start_matches("http://").parse().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (flag, streams) = (std::sync::Arc::clone(&cut), std::sync::Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if flag.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(target) else {
                    continue;
                };
                let mut open = streams.lock().unwrap();
                open.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Self { address, cut, open }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A network partition cuts a worker off from the bucket in the middle of a call, for longer
/// than its lease (two machines: each worker has a working directory of its own): the worker stops writing (the call's result, which it has, is never put), a
/// second worker takes the conversation over once the lease expired, answers the call as lost
/// and finishes the conversation; when the link comes back the first worker's late writes are
/// refused (its lease and its version of the transcript are stale) and it goes on as a worker.
/// The transcript holds one answer for the call, the lost-call error, and is `flemma check`
/// clean; the lease ends released by the second worker.
#[test]
fn a_partitioned_worker_never_writes_over_the_worker_that_took_over() {
    let env = Env::new("worker-partition");
    let model = mock_model::MockModel::start_with_command(1, "sleep 3; echo slept").unwrap();
    let key = "split/a.chat";
    env.create(key, "@You:\n[conversation split] Sleep a little.\n");
    let partition = Partition::to(&env.endpoint);
    let mut fleet = Fleet(vec![
        env.worker_command(&partition.endpoint(), &model, "split", "3", "all")
            .arg("--workdir")
            .arg(env.dir.join("first-machine"))
            .spawn()
            .unwrap(),
    ]);
    // Running: its block has lost the `(approved)` the placeholder had (a cut before that
    // would leave the second worker an approved call to run, not a lost one).
    wait_until("the call is running", Duration::from_secs(30), || {
        env.text(key)
            .is_some_and(|t| t.contains("**Tool Result:** `toolu_mock_1`\n"))
    });
    partition.cut();
    // The first worker's lease expires (3 s) while it cannot reach the bucket.
    std::thread::sleep(Duration::from_secs(4));
    let log = env.dir.join("second.log");
    fleet.0.push(
        env.worker_command(&env.endpoint, &model, "split", "3", "all")
            .arg("--workdir")
            .arg(env.dir.join("second-machine"))
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let finished = wait_for(Duration::from_secs(30), || {
        env.text(key).is_some_and(|t| finished_once(&t))
    });
    assert!(
        finished,
        "the second worker did not finish it: {:?}\n{}",
        env.text(key),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    partition.restore();
    // The first worker's retries reach the bucket again and are refused.
    std::thread::sleep(Duration::from_secs(5));
    let text = env.text_of(key);
    assert!(finished_once(&text), "{text}");
    assert!(
        !text.contains("```\nslept\n```"),
        "the cut-off worker's result was written: {text}"
    );
    assert!(
        text.contains("Tool execution lost: session ended before completion."),
        "{text}"
    );
    for worker in &fleet.0 {
        terminate(worker);
    }
    for worker in &mut fleet.0 {
        let status = worker.wait().unwrap();
        assert!(status.success(), "{status}");
    }
    assert_eq!(env.text_of(key), text, "nothing written after");
    let file = env.dir.join("split.chat");
    std::fs::write(&file, &text).unwrap();
    let check = crate::flemma_command()
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(env.lease(key).released);
}

/// One answer to the one call, then the model's last answer.
fn finished_once(text: &str) -> bool {
    text.matches("**Tool Result:** `toolu_mock_1`").count() == 1
        && text.ends_with("@Assistant:\nIt said hi.\n\n@You:\n")
}

/// A person approves a call on the bucket: a worker that leaves approval to people (`--approve
/// none`) stops at the pending call; `flemma approve s3://… ID` marks it approved under the
/// conversation's lease; the worker sees the change, runs the call and the conversation ends.
#[test]
fn flemma_approve_of_an_object_lets_a_worker_run_the_call() {
    let env = Env::new("worker-approve");
    let model = mock_model::MockModel::start_with_command(1, "echo approved-run").unwrap();
    let key = "approve/a.chat";
    env.create(key, "@You:\nRun it once I say so.\n");
    let mut fleet = Fleet(vec![
        env.worker_command(&env.endpoint, &model, "approve", "3", "none")
            .spawn()
            .unwrap(),
    ]);
    wait_until(
        "the call waits for approval",
        Duration::from_secs(30),
        || {
            env.text(key)
                .is_some_and(|t| t.contains("**Tool Result:** `toolu_mock_1` (pending)"))
        },
    );
    // The worker's run has ended (it waits for no one): the lease is released.
    wait_until("the lease is released", Duration::from_secs(10), || {
        env.lease(key).released
    });
    assert!(!env.text_of(key).contains("approved-run\n```"));
    // The worker placed the call for a person, on the bucket (where every host looks).
    let placed = flemma::object::placements_prefix(&key.into());
    assert!(
        env.rt
            .block_on(env.bucket.store().list(Some(&placed)).count())
            == 1,
        "no placement under {placed}"
    );
    // The person approves from another machine: its own state directory, nothing shared
    // with the worker's but the bucket.
    let out = env
        .flemma(&model)
        .env("XDG_STATE_HOME", env.dir.join("another-machine-state"))
        .args(["approve", &env.url(key), "toolu_mock_1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_until(
        "the worker runs the approved call",
        Duration::from_secs(30),
        || {
            env.text(key).is_some_and(|t| {
                t.contains("```\napproved-run\n```") && t.ends_with("It said hi.\n\n@You:\n")
            })
        },
    );
    terminate(&fleet.0[0]);
    assert!(fleet.0[0].wait().unwrap().success());
    assert!(env.lease(key).released);
    // An unknown call is the spec's error, exit 1, and the lease is given back.
    let out = env
        .flemma(&model)
        .args(["approve", &env.url(key), "toolu_nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(env.lease(key).released);
}

/// `flemma worker` built with the `otel` feature exports the spans of the conversations it
/// runs, and sends the last batch when SIGTERM stops it.
#[cfg(feature = "otel")]
#[test]
fn a_worker_exports_the_spans_of_the_conversations_it_runs() {
    let env = Env::new("worker-otel");
    let model = mock_model::MockModel::start_with_command(TURNS, "echo hi").unwrap();
    let key = "otel/one.chat";
    env.create(key, "@You:\nSay hi.\n");
    let (collector, requests) = crate::otel::receiver();
    let mut command = env.worker_command(&env.endpoint, &model, "otel", "3", "all");
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
        // Longer than the run: the spans go in the batch SIGTERM sends.
        .env("OTEL_BSP_SCHEDULE_DELAY", "60000");
    let mut fleet = Fleet(vec![command.spawn().unwrap()]);
    wait_until(
        "the conversation is finished",
        Duration::from_secs(60),
        || env.text(key).is_some_and(|text| finished(&text)),
    );
    terminate(&fleet.0[0]);
    assert!(fleet.0[0].wait().unwrap().success());
    let requests: Vec<_> = requests.try_iter().collect();
    let (spans, services) = crate::otel::decode(&requests, &[]);
    assert!(services.iter().all(|name| name == "flemma"), "{services:?}");
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let count = |name: &str| names.iter().filter(|n| **n == name).count();
    assert!(count("invoke_agent flemma") >= 1, "{names:?}");
    assert_eq!(count("execute_tool bash"), TURNS, "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("chat ")).count(),
        TURNS + 1,
        "{names:?}"
    );
}
