//! A conversation on object storage against the same conversation in a file (issue 23):
//! `cargo bench -p flemma-cli --bench object`.
//!
//! Each iteration starts the release `flemma` binary as a process and waits for it to exit:
//! `flemma run s3://BUCKET/bench/N.chat` (moto's S3 server on 127.0.0.1, started by the bench
//! from `tests/object/.venv`, as the tests start it; `scripts/test` installs it) or
//! `flemma run DIR/N.chat` (a file in `target/bench-object/`), both with `--provider
//! anthropic` against the local mock model server (`support/mock_model.rs`), which answers N
//! tool turns (a line of text and one `bash` call of `echo hi`) and then a final text. Every
//! run starts from a fresh one-message conversation whose Lua frontmatter approves `bash`;
//! the sandbox is off (`sandbox.enabled=false`) so that the difference is the storage alone.
//!
//! - `object/turns_0`, `object/turns_10`: the conversation as an object (its lease taken and
//!   released, every change a conditional put).
//! - `file/turns_0`, `file/turns_10`: the conversation as a file.
//!
//! The cost of one tool turn is (`turns_10` − `turns_0`) / 10 for each; the object's overhead
//! per turn is the difference of the two. Before criterion's runs the bench times every case
//! alternately (`FLEMMA_BENCH_OBJECT_PAIRED` rounds, default 7; 0 skips it) and prints the
//! medians, the per-turn costs and the object requests per run on stderr.
#![allow(
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors and reports on stderr"
)]

#[path = "support/mock_model.rs"]
mod mock_model;

#[path = "../../flemma-object/tests/it/server.rs"]
mod server;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion};
use flemma::object::Bucket;
use flemma::object::object_store::ObjectStoreExt as _;
use mock_model::MockModel;

const FLEMMA: &str = env!("CARGO_BIN_EXE_flemma");
const CHAT: &str =
    "```lua\nflemma.opt.tools.auto_approve:append(\"bash\")\n```\n@You:\nSay hi through bash.\n";
const TURNS: u32 = 10;

#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    turns: u32,
    object: bool,
}

const CASES: [Case; 4] = [
    Case {
        name: "file/turns_0",
        turns: 0,
        object: false,
    },
    Case {
        name: "file/turns_10",
        turns: TURNS,
        object: false,
    },
    Case {
        name: "object/turns_0",
        turns: 0,
        object: true,
    },
    Case {
        name: "object/turns_10",
        turns: TURNS,
        object: true,
    },
];

/// Where the runs' conversations are: a bucket on moto's server, a local directory.
struct Bench {
    rt: tokio::runtime::Runtime,
    bucket: Bucket,
    endpoint: String,
    dir: PathBuf,
    next: std::cell::Cell<usize>,
    ten: MockModel,
    zero: MockModel,
}

/// A conversation ready to run: its argument to `flemma run`, and its key or file.
enum Chat {
    Object { url: String, key: String },
    File(PathBuf),
}

impl Bench {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let bucket = rt.block_on(server::bucket());
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-object");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("bench directory");
        Self {
            rt,
            bucket,
            endpoint: server::server().endpoint.clone(),
            dir,
            next: std::cell::Cell::new(0),
            ten: MockModel::start(TURNS as usize).expect("mock model"),
            zero: MockModel::start(0).expect("mock model"),
        }
    }

    fn model(&self, case: Case) -> &MockModel {
        if case.turns == 0 {
            &self.zero
        } else {
            &self.ten
        }
    }

    /// A fresh conversation for `case`.
    fn chat(&self, case: Case) -> Chat {
        let next = self.next.get() + 1;
        self.next.set(next);
        if case.object {
            let key = format!("bench/{next}.chat");
            let store = self.bucket.store();
            self.rt
                .block_on(store.put(&key.as_str().into(), CHAT.into()))
                .expect("conversation object");
            Chat::Object {
                url: format!("s3://{}/{key}", self.bucket.name()),
                key,
            }
        } else {
            let file = self.dir.join(format!("{next}.chat"));
            std::fs::write(&file, CHAT).expect("conversation file");
            Chat::File(file)
        }
    }

    fn command(&self, case: Case, chat: &Chat) -> Command {
        let mut command = Command::new(FLEMMA);
        command.current_dir(&self.dir).arg("run");
        match chat {
            Chat::Object { url, .. } => command.arg(url),
            Chat::File(file) => command.arg(file),
        };
        command
            .args(["--provider", "anthropic", "--max-turns", "1000"])
            .args(["--set", "sandbox.enabled=false"])
            .env("ANTHROPIC_API_KEY", "sk-bench")
            .env("FLEMMA_BASE_URL", self.model(case).base_url())
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }

    fn text(&self, chat: &Chat) -> String {
        match chat {
            Chat::Object { key, .. } => self.rt.block_on(async {
                let got = self
                    .bucket
                    .store()
                    .get(&key.as_str().into())
                    .await
                    .expect("the conversation object");
                String::from_utf8(got.bytes().await.expect("its bytes").to_vec()).expect("UTF-8")
            }),
            Chat::File(file) => std::fs::read_to_string(file).expect("the conversation file"),
        }
    }

    /// Runs `case` once, checking it did what the bench claims.
    fn check(&self, case: Case) {
        let chat = self.chat(case);
        let out = self.command(case, &chat).output().expect("flemma starts");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", case.name);
        let text = self.text(&chat);
        assert_eq!(
            text.matches("```\nhi\n```").count(),
            case.turns as usize,
            "{text}"
        );
        assert!(text.ends_with("It said hi.\n\n@You:\n"), "{text}");
    }

    fn run(&self, case: Case) -> Duration {
        let chat = self.chat(case);
        let mut command = self.command(case, &chat);
        command.stdout(Stdio::null()).stderr(Stdio::null());
        let started = Instant::now();
        let status = command.status().expect("flemma starts");
        let took = started.elapsed();
        assert!(status.success(), "{}: {status}", case.name);
        took
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn paired(bench: &Bench) {
    let rounds: usize = std::env::var("FLEMMA_BENCH_OBJECT_PAIRED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(7);
    if rounds == 0 {
        return;
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); CASES.len()];
    for _ in 0..rounds {
        for (i, case) in CASES.iter().enumerate() {
            times[i].push(bench.run(*case));
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    for (case, m) in CASES.iter().zip(&medians) {
        eprintln!(
            "paired ({rounds} rounds) {}: median {:.1} ms",
            case.name,
            ms(*m)
        );
    }
    let per_turn = |zero: Duration, ten: Duration| (ms(ten) - ms(zero)) / f64::from(TURNS);
    let file = per_turn(medians[0], medians[1]);
    let object = per_turn(medians[2], medians[3]);
    eprintln!(
        "paired: per tool turn: file {file:.2} ms, object {object:.2} ms, overhead {:.2} ms; \
         per run without tools: overhead {:.1} ms",
        object - file,
        ms(medians[2]) - ms(medians[0])
    );
}

fn main() {
    let bench = Bench::new();
    for case in CASES {
        bench.check(case);
    }
    paired(&bench);
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    for case in CASES {
        criterion.bench_function(case.name, |b| {
            b.iter_batched(
                || bench.chat(case),
                |chat| {
                    let status = bench
                        .command(case, &chat)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .expect("flemma starts");
                    assert!(status.success(), "{}: {status}", case.name);
                },
                BatchSize::PerIteration,
            );
        });
    }
    criterion.final_summary();
}
