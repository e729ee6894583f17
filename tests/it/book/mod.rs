//! The book in `docs/`: every page's Rust snippets are doctests of the facade.

use std::path::{Path, PathBuf};

mod configuration;
mod tools;

fn pages(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            pages(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "md") {
            found.push(path);
        }
    }
    Ok(())
}

/// A page with a Rust snippet that is left out of `src/lib.rs`'s `book` module would have its
/// snippets never compiled.
#[test]
fn every_page_with_rust_is_a_doctest_of_the_facade() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs"))?;
    let mut found = Vec::new();
    pages(&root.join("docs"), &mut found)?;
    let mut with_rust = 0;
    for path in found {
        let text = std::fs::read_to_string(&path)?;
        if !text
            .lines()
            .any(|line| line.trim_start().starts_with("```rust"))
        {
            continue;
        }
        with_rust += 1;
        let relative = path
            .strip_prefix(root)?
            .to_string_lossy()
            .replace('\\', "/");
        let include = format!("#[doc = include_str!(\"../{relative}\")]");
        assert!(
            lib.contains(&include),
            "{relative} has Rust snippets but is not in src/lib.rs's `book`"
        );
    }
    assert!(with_rust >= 4, "{with_rust} pages with Rust snippets");
    Ok(())
}

/// Every page the summary links exists (mdBook would refuse a missing one), and every page of
/// the book is linked from the summary.
#[test]
fn the_summary_links_every_page_and_only_pages_that_exist() -> Result<(), Box<dyn std::error::Error>>
{
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md"))?;
    let mut linked = Vec::new();
    for target in summary.split("](").skip(1) {
        let target = &target[..target.find(')').unwrap_or(0)];
        if !target.is_empty() {
            assert!(
                docs.join(target).is_file(),
                "SUMMARY.md links {target}, which is missing"
            );
            linked.push(docs.join(target));
        }
    }
    let mut found = Vec::new();
    pages(&docs, &mut found)?;
    for page in found {
        if page.file_name().is_some_and(|name| name != "SUMMARY.md") {
            assert!(
                linked.contains(&page),
                "{} is not in SUMMARY.md",
                page.display()
            );
        }
    }
    Ok(())
}

/// Compares a page generated from the code with the committed one; `FLEMMA_UPDATE_DOCS=1`
/// writes it instead.
fn check_fresh(relative: &str, page: &str) -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os("FLEMMA_UPDATE_DOCS").is_some() {
        std::fs::write(&path, page)?;
        return Ok(());
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "{relative} is stale: run `FLEMMA_UPDATE_DOCS=1 cargo test -p flemma --all-features \
         --test it book` and commit it"
    );
    Ok(())
}

/// `docs/reference/tools.md` is what the built-in tools' definitions say.
#[test]
fn the_built_in_tools_reference_is_fresh() -> Result<(), Box<dyn std::error::Error>> {
    check_fresh("docs/reference/tools.md", &tools::render()?)
}

/// `docs/reference/configuration.md` is what the options schema and the presets say.
#[test]
fn the_configuration_reference_is_fresh() -> Result<(), Box<dyn std::error::Error>> {
    check_fresh("docs/reference/configuration.md", &configuration::render())
}
