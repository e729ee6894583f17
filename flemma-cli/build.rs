//! Lays out the code a `flemma` run executes together at the start of the binary's text.
//!
//! The kernel maps an executable's code in windows (64 KiB here) around each page a process
//! touches, so the resident memory of a run follows how many places of the text it touches,
//! not how much code it runs. `link-order.txt` lists the functions a run executes (written by
//! `scripts/link-order`, which profiles release runs with callgrind); this script hands it to
//! the linker as lld's `--symbol-ordering-file`, which places them first, together.
//!
//! Only where the linker is known to be lld: the `x86_64-unknown-linux-gnu` target with rustc
//! 1.90 or later (which links with its own `rust-lld` there) and no linker chosen by the
//! build (`RUSTC_LINKER`, or any link flag in the rustflags: `-C linker`, `-C link-arg`).
//! Elsewhere, or with `FLEMMA_LINK_ORDER=0`, nothing is added and the linker's default layout
//! is kept. Names the file lists that the binary does not have (another version, other
//! features, another toolchain) are ignored: the layout is then partly the default one, never a
//! failed link.
//! It applies to every profile, so that the debug builds of the tests link with it too.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=link-order.txt");
    println!("cargo::rerun-if-env-changed=FLEMMA_LINK_ORDER");
    if env::var_os("FLEMMA_LINK_ORDER").is_some_and(|value| value == "0") {
        return;
    }
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu")
        || env::var_os("RUSTC_LINKER").is_some()
        || env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| flags.contains("link"))
        || !rustc_links_with_lld()
    {
        return;
    }
    let Some(dir) = env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let file = PathBuf::from(dir).join("link-order.txt");
    // `-Wl,` splits its argument at commas.
    let Some(file) = file.to_str().filter(|path| !path.contains(',')) else {
        return;
    };
    if !PathBuf::from(file).is_file() {
        return;
    }
    println!("cargo::rustc-link-arg-bin=flemma=-Wl,--symbol-ordering-file={file}");
    println!("cargo::rustc-link-arg-bin=flemma=-Wl,--no-warn-symbol-ordering");
}

/// Whether the compiler is rustc 1.90 or later, the first to link `x86_64-unknown-linux-gnu`
/// with its own `rust-lld` by default.
fn rustc_links_with_lld() -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(output) = Command::new(rustc).arg("-vV").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(release) = text.lines().find_map(|line| line.strip_prefix("release: ")) else {
        return false;
    };
    let mut parts = release.split(['.', '-']);
    let major = parts.next().and_then(|part| part.parse::<u32>().ok());
    let minor = parts.next().and_then(|part| part.parse::<u32>().ok());
    matches!((major, minor), (Some(1), Some(minor)) if minor >= 90) || major.is_some_and(|m| m > 1)
}
