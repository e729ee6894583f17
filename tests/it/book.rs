//! The book in `docs/`: every chapter's Rust snippets are doctests of the facade.

use std::path::{Path, PathBuf};

fn chapters(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            chapters(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "md")
            && path.file_name().is_some_and(|name| name != "SUMMARY.md")
        {
            found.push(path);
        }
    }
    Ok(())
}

/// A chapter left out of `src/lib.rs`'s `book` module would have its snippets never compiled.
#[test]
fn every_chapter_is_a_doctest_of_the_facade() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs"))?;
    let src = root.join("docs/src");
    let mut found = Vec::new();
    chapters(&src, &mut found)?;
    assert!(found.len() >= 8, "{found:?}");
    for path in found {
        let relative = path
            .strip_prefix(root)?
            .to_string_lossy()
            .replace('\\', "/");
        let include = format!("#[doc = include_str!(\"../{relative}\")]");
        assert!(
            lib.contains(&include),
            "{relative} is not included in src/lib.rs's `book`"
        );
    }
    Ok(())
}

/// Every page the summary links exists (mdBook would create a missing one, empty).
#[test]
fn the_summary_links_only_pages_that_exist() -> Result<(), Box<dyn std::error::Error>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md"))?;
    let mut links = 0;
    for target in summary.split("](").skip(1) {
        let target = &target[..target.find(')').unwrap_or(0)];
        if !target.is_empty() {
            links += 1;
            assert!(
                src.join(target).is_file(),
                "SUMMARY.md links {target}, which is missing"
            );
        }
    }
    assert!(links >= 8);
    Ok(())
}
