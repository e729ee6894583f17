//! Conversations on object storage: `flemma run s3://bucket/key.chat` and `flemma worker
//! --store s3://bucket/prefix` (feature `object-store`, crate flemma-object).
//!
//! The bucket's client comes from the `AWS_*` environment variables (`AWS_ENDPOINT_URL` for an
//! S3-compatible server, `AWS_ALLOW_HTTP=true` for a plain-HTTP one); nothing of them is
//! written anywhere.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::config::Layer;
use flemma::core::Conversation;
use flemma::object::{Assignment, Bucket, Finished, ObjectUrl, Taken, Worker, WorkerOptions};
use tokio_util::sync::CancellationToken;

use crate::failure::{Failure, failed};
use crate::options::Settings;
use crate::runtime::runtime;
use crate::setup::{Action, ApproveAll, RunProvider, make_provider};

/// How long `flemma run s3://…` holds a conversation's lease between renewals' worth: the
/// time after which another host may take over if this one dies.
const RUN_LEASE: Duration = Duration::from_secs(30);

fn usage(error: impl Into<anyhow::Error>) -> Failure {
    Failure::usage(error.into())
}

/// `error`, with a word on where the credentials came from when the environment names none
/// (the client then asks the instance metadata service, which answers only on a cloud host).
fn with_hint(error: anyhow::Error) -> anyhow::Error {
    const CREDENTIALS: [&str; 4] = [
        "AWS_ACCESS_KEY_ID",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ];
    if CREDENTIALS
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        return error;
    }
    error.context(
        "no AWS credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
         or a container or web identity): they were asked of the instance metadata service",
    )
}

/// The bucket of `url`, its client from the environment.
fn bucket(url: &ObjectUrl) -> Result<Bucket, Failure> {
    Bucket::from_env(url.bucket()).map_err(usage)
}

/// A conversation `flemma run` runs under its lease.
pub(crate) struct ObjectRun {
    assignment: Assignment,
    done: CancellationToken,
    renewals: tokio::task::JoinHandle<()>,
    announcing: tokio::task::JoinHandle<()>,
}

impl ObjectRun {
    pub(crate) fn conversation(&self) -> Arc<dyn Conversation> {
        Arc::clone(&self.assignment.conversation) as Arc<dyn Conversation>
    }

    /// Stops renewing and releases the lease.
    pub(crate) async fn release(self) {
        self.done.cancel();
        let _ = self.renewals.await;
        let _ = self.announcing.await;
        if let Err(error) = self.assignment.lease.release().await {
            tracing::warn!(%error, "lease not released");
        }
    }
}

/// FILE as an object (`s3://…`): its lease taken, the calls a dead holder left answered;
/// `None` when FILE is a path.
pub(crate) fn open_for_run(
    file: &Path,
    output: Option<&Path>,
) -> Result<Option<ObjectRun>, Failure> {
    let Some(text) = file.to_str().filter(|t| ObjectUrl::is_object_url(t)) else {
        return Ok(None);
    };
    let url = ObjectUrl::parse(text).map_err(usage)?;
    if output.is_some() {
        return Err(usage(anyhow::anyhow!(
            "--output is for files; {url} is written in place"
        )));
    }
    take_object(&url).map(Some)
}

/// The conversation at `url` under this process's lease (renewed until
/// [`ObjectRun::release`]), the calls a dead holder left answered; exit 1 when another live
/// host holds it.
fn take_object(url: &ObjectUrl) -> Result<ObjectRun, Failure> {
    let bucket = bucket(url)?;
    let holder = WorkerOptions::new().holder;
    let runtime = runtime()?;
    let workdir = workdir()?;
    // This host on its machine (the working directory): its jobs' journal names it.
    let machine = Arc::new(
        flemma::object::Machine::of_workdir(&bucket, &workdir, RUN_LEASE)
            .map_err(|e| failed(e.into()))?,
    );
    let taken = runtime
        .block_on(flemma::object::take(
            &bucket,
            url.key(),
            &holder,
            RUN_LEASE,
            Some(&workdir),
            Some(Arc::clone(&machine)),
        ))
        .map_err(|e| failed(with_hint(e.into())))?;
    let assignment = match taken {
        Taken::Leased(assignment) => assignment,
        Taken::Busy(record) => {
            let by = record.map_or_else(
                || "another host".to_owned(),
                |r| {
                    format!(
                        "{} (its lease ends in {:.0} s unless renewed)",
                        r.holder,
                        (r.expires_at - now()).max(0.0)
                    )
                },
            );
            return Err(failed(anyhow::anyhow!("{url} is being run by {by}")));
        }
        _ => return Err(failed(anyhow::anyhow!("{url} cannot be taken"))),
    };
    for id in &assignment.recovered {
        tracing::warn!(%url, id, "a call its last host left running was answered as lost");
    }
    let done = CancellationToken::new();
    let renewals = runtime.spawn(flemma::object::keep(
        Arc::clone(&assignment.lease),
        done.clone(),
        assignment.stop.clone(),
    ));
    let until = done.clone();
    let announcing = runtime.spawn(async move { machine.keep_announced(until).await });
    Ok(ObjectRun {
        assignment,
        done,
        renewals,
        announcing,
    })
}

/// `flemma approve|reject|approve-all s3://…`: the action on the conversation under its lease
/// (so that no worker runs it meanwhile), after the recovery of its jobs, as for a file; a
/// worker then runs the approved calls. `None` when FILE is a path.
pub(crate) fn act(
    file: &Path,
    action: &Action<'_>,
    settings: &Settings,
) -> Result<Option<u8>, Failure> {
    let Some(text) = file.to_str().filter(|t| ObjectUrl::is_object_url(t)) else {
        return Ok(None);
    };
    let url = ObjectUrl::parse(text).map_err(usage)?;
    let config = settings.load()?;
    let registry = crate::setup::registry(&config)?;
    let run = take_object(&url)?;
    let executor = crate::setup::executor(run.conversation(), registry, config).build();
    let runtime = runtime()?;
    let result = crate::setup::act_on(&executor, action, &runtime);
    runtime.block_on(run.release());
    result.map_err(|e| crate::setup::executor_failure(Path::new(text), e))?;
    Ok(Some(0))
}

/// A failure's error, for a runner's report.
fn message(failure: Failure) -> String {
    failure
        .error
        .map_or_else(|| "failed".to_owned(), |e| format!("{e:#}"))
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The process's working directory, where object conversations get their local paths
/// (`BUCKET/KEY` under it).
fn workdir() -> Result<PathBuf, Failure> {
    std::env::current_dir()
        .map_err(|e| usage(anyhow::Error::new(e).context("no working directory")))
}

/// The arguments of `flemma worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The prefix: `s3://BUCKET/PREFIX` (every `.chat` object under it, at any depth).
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,
    /// How many conversations this worker runs at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) concurrency: usize,
    /// The leases' time to live: how soon another worker takes over a conversation of this
    /// one if it dies (renewed every third of it).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub(crate) lease_seconds: f64,
    /// How often it looks for ready conversations when it has room.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub(crate) poll_seconds: f64,
    /// The provider, as for `run`.
    #[arg(long, value_enum, default_value = "anthropic")]
    pub(crate) provider: RunProvider,
    /// The model (default: the `model` option, else a per-provider default).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// The script `--provider scripted` replays, from its start for each conversation.
    #[arg(long, value_name = "PATH")]
    pub(crate) script: Option<PathBuf>,
    /// What happens to calls that need approval (a worker has no terminal to ask on).
    #[arg(long, value_enum, default_value = "none")]
    pub(crate) approve: WorkerApprove,
    /// Stop a conversation after this many consecutive responses that ask for tools.
    #[arg(long, value_name = "N")]
    pub(crate) max_turns: Option<u64>,
    /// Where conversations live on this machine: `DIR/BUCKET/KEY` is each one's local path,
    /// its tools' working directory and the home of its result store (default: the working
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) workdir: Option<PathBuf>,
}

/// `flemma worker --approve`: what a worker can do with a call that needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WorkerApprove {
    /// Approve every pending call.
    All,
    /// Leave pending calls in the conversation (`flemma approve s3://…` decides them).
    None,
}

fn seconds(value: f64, flag: &str) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| usage(anyhow::anyhow!("{flag} takes a positive number of seconds")))
}

/// `flemma worker --store s3://bucket/prefix`.
pub(crate) fn worker(args: &WorkerArgs, settings: &Settings) -> Result<u8, Failure> {
    let url = ObjectUrl::parse(&args.store).map_err(usage)?;
    let lease = seconds(args.lease_seconds, "--lease-seconds")?;
    let poll = seconds(args.poll_seconds, "--poll-seconds")?;
    let mut config = settings.load()?;
    if let Some(model) = &args.model {
        config
            .set(Layer::Runtime, "model", model.as_str())
            .map_err(usage)?;
    }
    // Checked once here, made again for each conversation (a script replays from its start).
    make_provider(
        args.provider,
        args.script.as_deref(),
        args.model.as_deref(),
        &config,
    )?;
    let registry = crate::setup::registry(&config)?;
    let bucket = bucket(&url)?;
    let options = WorkerOptions::new()
        .concurrency(args.concurrency)
        .lease_ttl(lease)
        .poll_interval(poll)
        .runs_pending(args.approve == WorkerApprove::All)
        .workdir(match &args.workdir {
            Some(dir) => std::path::absolute(dir).map_err(usage)?,
            None => workdir()?,
        });
    let holder = options.holder.clone();
    let worker = Worker::new(bucket, url.key().clone(), options);
    let runtime = runtime()?;
    let runner = {
        let (provider, script, model) = (args.provider, args.script.clone(), args.model.clone());
        let approve_all = args.approve == WorkerApprove::All;
        let max_turns = args.max_turns;
        move |assignment: Assignment| {
            let made = make_provider(provider, script.as_deref(), model.as_deref(), &config)
                .map_err(message);
            let (config, registry) = (config.clone(), registry.clone());
            async move {
                let provider =
                    made.map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
                run_one(
                    assignment,
                    config,
                    registry,
                    provider,
                    approve_all,
                    max_turns,
                )
                .await
            }
        }
    };
    let stderr = |line: &str| {
        let _ = writeln!(std::io::stderr().lock(), "{}", crate::visible::text(line));
    };
    stderr(&format!(
        "worker {holder}: running the conversations under {url}"
    ));
    let served = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let signals = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                wait_for_signal().await;
                shutdown.cancel();
            }
        });
        let result = worker
            .run(
                runner,
                |finished: Finished| stderr(&report(&finished)),
                shutdown,
            )
            .await;
        signals.abort();
        result
    });
    drop(runtime);
    served.map_err(|e| failed(with_hint(e.into())))?;
    stderr(&format!("worker {holder}: stopped"));
    Ok(0)
}

/// One line about a finished run: `worker: URL: done (N object requests: G get, P put (R renewing the lease), L list)`.
fn report(finished: &Finished) -> String {
    let r = finished.requests;
    let outcome = finished.error.as_deref().unwrap_or("done");
    let recovered = if finished.recovered > 0 {
        format!(", {} lost call(s) answered", finished.recovered)
    } else {
        String::new()
    };
    format!(
        "worker: {}: {outcome} ({} object requests: {} get, {} put ({} renewing the lease), {} list{recovered})",
        finished.url,
        r.total(),
        r.get,
        r.put,
        finished.lease_renewals,
        r.list
    )
}

/// The first SIGINT, SIGTERM or SIGHUP.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs one conversation's session until it stops, or until its assignment says stop (the
/// lease was lost, the worker is shutting down): then the session is cancelled and its abort
/// text written.
async fn run_one(
    assignment: Assignment,
    config: flemma::config::Config,
    registry: flemma::runtime::ToolRegistry,
    provider: Arc<dyn flemma::providers::Provider>,
    approve_all: bool,
    max_turns: Option<u64>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let conversation = Arc::clone(&assignment.conversation) as Arc<dyn Conversation>;
    let models = crate::setup::models(&config).map_err(message)?;
    let mut executor = crate::setup::executor(conversation, registry, config);
    if approve_all {
        executor = executor.approver(Arc::new(ApproveAll));
    }
    let session =
        crate::setup::session_of(executor, provider, models, max_turns, None).map_err(message)?;
    let run = session.run();
    tokio::pin!(run);
    let stopped = tokio::select! {
        stopped = &mut run => stopped,
        () = assignment.stop.cancelled() => {
            session.cancel_all();
            run.await
        }
    };
    stopped?;
    Ok(())
}

/// An object conversation as `flemma store path` sees it: its local path on this machine (as
/// `flemma run` gives it, under the working directory), its text when it exists, and where
/// its results go on the bucket.
pub(crate) struct ObjectPlace {
    pub(crate) local: PathBuf,
    pub(crate) text: Option<String>,
    bucket: Bucket,
    key: flemma::object::object_store::path::Path,
}

impl ObjectPlace {
    /// The object URL of the result file `path`; `None` for a file that stays on the machine
    /// (a store path configured outside the conversation's store directory).
    pub(crate) fn url_of(&self, path: &Path) -> Option<String> {
        flemma::object::result_key(&self.local, &self.key, path).map(|key| self.bucket.url(&key))
    }
}

/// FILE as an object (`s3://…`), its text read when it exists; `None` when FILE is a path.
pub(crate) fn place(file: &Path) -> Result<Option<ObjectPlace>, Failure> {
    let Some(text) = file.to_str().filter(|t| ObjectUrl::is_object_url(t)) else {
        return Ok(None);
    };
    let url = ObjectUrl::parse(text).map_err(usage)?;
    let bucket = bucket(&url)?;
    let mut local = workdir()?.join(url.bucket());
    local.extend(url.key().parts().map(|p| p.as_ref().to_owned()));
    let runtime = runtime()?;
    let text = match runtime.block_on(flemma::object::ObjectConversation::open(&bucket, url.key()))
    {
        Ok(conversation) => Some(
            runtime
                .block_on(conversation.snapshot())
                .map_err(|e| failed(e.into()))?
                .text
                .as_str()
                .to_owned(),
        ),
        Err(flemma::object::ObjectError::Request {
            source: flemma::object::object_store::Error::NotFound { .. },
            ..
        }) => None,
        Err(error) => return Err(failed(with_hint(error.into()))),
    };
    Ok(Some(ObjectPlace {
        local,
        text,
        bucket,
        key: url.key().clone(),
    }))
}
