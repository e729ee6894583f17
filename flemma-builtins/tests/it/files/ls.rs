//! `ls` (spec §12.7).

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn previews() {
    let tool = LsTool::new().unwrap();
    assert_eq!(
        show(
            &tool,
            &json!({"label": "exploring structure", "path": "src/", "max_depth": 3, "limit": null})
        ),
        "ls: src/  depth=3 — exploring structure"
    );
    assert_eq!(
        show(
            &tool,
            &json!({"label": "l", "path": ".", "max_depth": 1, "limit": null})
        ),
        "ls: . — l"
    );
}

fn tree() -> TempDir {
    let dir = TempDir::new();
    for name in [
        "beta/deep/deeper/x.txt",
        "Alpha/nested.txt",
        "Alpha/Zeta/z.txt",
        "b.txt",
        "A.txt",
        "c.TXT",
        ".hidden",
    ] {
        dir.write(name, "");
    }
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    dir
}

#[tokio::test]
async fn ls_lists_directories_first_then_files_case_insensitively() {
    let dir = tree();
    let ls = LsTool::new().unwrap();
    let out = run(
        &ls,
        dir.path(),
        json!({"label": "l", "path": ".", "max_depth": null, "limit": null}),
    )
    .await;
    assert_eq!(
        out,
        ok("Alpha/\nbeta/\nempty/\n.hidden\nA.txt\nb.txt\nc.TXT\n\n[7 entries]")
    );
    // Depth 1 given explicitly shows no depth.
    let out = run(&ls, dir.path(), json!({"path": "Alpha", "max_depth": 1})).await;
    assert_eq!(out, ok("Zeta/\nnested.txt\n\n[2 entries]"));
    let out = run(&ls, dir.path(), json!({"path": "Alpha/Zeta"})).await;
    assert_eq!(out, ok("z.txt\n\n[1 entry]"));
    let out = run(&ls, dir.path(), json!({"path": "empty"})).await;
    assert_eq!(out, ok("[0 entries]"));
}

#[tokio::test]
async fn ls_recurses_to_max_depth_with_relative_paths() {
    let dir = tree();
    let ls = LsTool::new().unwrap();
    let out = run(&ls, dir.path(), json!({"path": ".", "max_depth": 2})).await;
    assert_eq!(
        out,
        ok(
            "Alpha/\nAlpha/Zeta/\nbeta/\nbeta/deep/\nempty/\n.hidden\nA.txt\nAlpha/nested.txt\nb.txt\nc.TXT\n\n[10 entries, depth=2]"
        )
    );
    // Deeper than the tree, capped at 10.
    let out = run(&ls, dir.path(), json!({"path": "beta", "max_depth": 50})).await;
    assert_eq!(
        out,
        ok("deep/\ndeep/deeper/\ndeep/deeper/x.txt\n\n[3 entries, depth=10]")
    );
    // A fraction rounds up, as the reference walk treats it.
    let out = run(&ls, dir.path(), json!({"path": "beta", "max_depth": 1.5})).await;
    assert_eq!(out, ok("deep/\ndeep/deeper/\n\n[2 entries, depth=2]"));
    // Below 1 is 1.
    let out = run(&ls, dir.path(), json!({"path": "beta", "max_depth": 0})).await;
    assert_eq!(out, ok("deep/\n\n[1 entry]"));
}

#[tokio::test]
async fn ls_stops_at_the_limit_before_sorting() {
    let dir = tree();
    let ls = LsTool::new().unwrap();
    // The walk reads each directory in name order ('.' < 'A' < 'B' < 'a' < 'b' < 'c' < 'e'), so
    // the first three entries found are `.hidden`, `A.txt` and `Alpha`; then they are sorted.
    let out = run(&ls, dir.path(), json!({"path": ".", "limit": 3})).await;
    assert_eq!(out, ok("Alpha/\n.hidden\nA.txt\n\n[3 entries]"));
    let out = run(&ls, dir.path(), json!({"path": ".", "limit": 1.9})).await;
    assert_eq!(out, ok(".hidden\n\n[1 entry]"));
    let out = run(&ls, dir.path(), json!({"path": ".", "limit": 0})).await;
    assert_eq!(out, ok("[0 entries]"));
    // The limit spans levels: level 1 first (7 entries), then level 2 in directory order.
    let out = run(
        &ls,
        dir.path(),
        json!({"path": ".", "limit": 8, "max_depth": 3}),
    )
    .await;
    assert_eq!(
        out,
        ok(
            "Alpha/\nAlpha/Zeta/\nbeta/\nempty/\n.hidden\nA.txt\nb.txt\nc.TXT\n\n[8 entries, depth=3]"
        )
    );
}

#[tokio::test]
async fn ls_head_truncates_a_long_listing_and_counts_every_entry() {
    let dir = TempDir::new();
    for i in 0..2100 {
        dir.write(&format!("f{i:04}"), "");
    }
    let ls = LsTool::new().unwrap();
    let out = run(&ls, dir.path(), json!({"path": ".", "limit": 5000})).await;
    let shown: Vec<String> = (0..2000).map(|i| format!("f{i:04}")).collect();
    assert_eq!(out, ok(format!("{}\n\n[2100 entries]", shown.join("\n"))));
    // The default limit is 500.
    let out = run(&ls, dir.path(), json!({"path": "."})).await;
    let shown: Vec<String> = (0..500).map(|i| format!("f{i:04}")).collect();
    assert_eq!(out, ok(format!("{}\n\n[500 entries]", shown.join("\n"))));
}

#[tokio::test]
async fn ls_resolves_against_the_working_directory_and_lists_links_to_directories_as_directories() {
    let dir = TempDir::new();
    dir.write("work/sub/in_work.txt", "");
    dir.write("sub/in_chat_dir.txt", "");
    let ctx = context(dir.path(), &dir.path().join("work"), "ls");
    let ls = LsTool::new().unwrap();
    assert_eq!(
        ls.execute(json!({"path": "sub"}), &ctx).await,
        ok("in_work.txt\n\n[1 entry]")
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("work/link")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("work/dangling"))
            .unwrap();
        // Listed with a slash, not entered.
        assert_eq!(
            ls.execute(json!({"path": ".", "max_depth": 3}), &ctx).await,
            ok("link/\nsub/\ndangling\nsub/in_work.txt\n\n[4 entries, depth=3]")
        );
    }
}

#[tokio::test]
async fn ls_errors() {
    let dir = tree();
    let ls = LsTool::new().unwrap();
    assert_eq!(
        run(&ls, dir.path(), json!({"path": "missing"})).await,
        err("Directory not found: missing")
    );
    assert_eq!(
        run(&ls, dir.path(), json!({"path": "b.txt"})).await,
        err("Directory not found: b.txt")
    );
    assert_eq!(
        run(&ls, dir.path(), json!({"path": ""})).await,
        err("No path provided")
    );
    assert_eq!(
        run(&ls, dir.path(), json!({})).await,
        err("No path provided")
    );
}
