//! Store benchmarks.
//!
//! - `store/write_1mb`: `write_atomic` of a 1 MB result (temporary file, fsync, directory lock,
//!   rename, directory fsync), without backups.
//! - `store/plain_write_rename_1mb`: the baseline, a plain atomic write of the same bytes:
//!   temporary file, fsync, rename.
//! - `store/plain_write_rename_nosync_1mb`: the same without fsync, for reference.
//! - `store/render_path`: rendering one store path with the default `$chat` format.
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::hint::black_box;
use std::io::Write as _;
use std::path::PathBuf;

use criterion::Criterion;
use flemma::ids::{ToolName, ToolUseId};
use flemma::store::{NoBackup, Store, write_atomic};

fn plain(path: &PathBuf, tmp: &PathBuf, content: &[u8], sync: bool) {
    let mut file = std::fs::File::create(tmp).expect("create");
    file.write_all(content).expect("write");
    if sync {
        file.sync_all().expect("sync");
    }
    drop(file);
    std::fs::rename(tmp, path).expect("rename");
}

fn benches(c: &mut Criterion) {
    // On the same file system as the build, not a tmpfs, so that fsync costs what it costs.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-store");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let content: Vec<u8> = (0..1_048_576u32)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz\n"[(i % 27) as usize])
        .collect();
    let target = dir.join("result.txt");
    let tmp = dir.join("result.txt.tmp");

    let mut group = c.benchmark_group("store");
    group.sample_size(30);
    group.bench_function("write_1mb", |b| {
        b.iter(|| write_atomic(black_box(&target), black_box(&content), &NoBackup).expect("write"));
    });
    group.bench_function("plain_write_rename_1mb", |b| {
        b.iter(|| plain(&target, &tmp, black_box(&content), true));
    });
    group.bench_function("plain_write_rename_nosync_1mb", |b| {
        b.iter(|| plain(&target, &tmp, black_box(&content), false));
    });

    let options = flemma::config::Config::new()
        .options()
        .expect("options")
        .tools
        .store;
    let store =
        Store::new(&options, Some("/home/ada/notes/example.chat".as_ref()), "1").expect("store");
    let id = ToolUseId::new("toolu_01ABC").expect("id");
    let name = ToolName::new("bash").expect("name");
    group.bench_function("render_path", |b| {
        b.iter(|| {
            store
                .path_for(black_box(&id), black_box(Some(&name)))
                .expect("path")
        });
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
