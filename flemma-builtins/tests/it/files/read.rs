//! `read` (spec §12.2).

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn previews() {
    let tool = ReadTool::new().unwrap();
    assert_eq!(
        show(
            &tool,
            &json!({"label": "reading tail", "path": "config.lua", "offset": 100, "limit": 50})
        ),
        "read: config.lua  +100,50 — reading tail"
    );
    assert_eq!(
        show(
            &tool,
            &json!({"label": "checking config", "path": "src/config.lua", "offset": null, "limit": 50})
        ),
        "read: src/config.lua  +0,50 — checking config"
    );
    assert_eq!(
        show(
            &tool,
            &json!({"label": "l", "path": "a", "offset": 7.0, "limit": null})
        ),
        "read: a  +7 — l"
    );
    assert_eq!(
        show(
            &tool,
            &json!({"label": "l", "path": "a", "offset": null, "limit": null})
        ),
        "read: a — l"
    );
}

#[tokio::test]
async fn read_returns_the_lines_of_a_file() {
    let dir = TempDir::new();
    dir.write("a.txt", "one\ntwo\nthree\n");
    let read = ReadTool::new().unwrap();
    let input = json!({"label": "l", "path": "a.txt", "offset": null, "limit": null});
    assert_eq!(run(&read, dir.path(), input).await, ok("one\ntwo\nthree"));
    // Without a final newline, and multi-byte text unchanged.
    dir.write("u.txt", "héllo wörld ✓\n日本語");
    let input = json!({"label": "l", "path": "u.txt"});
    assert_eq!(
        run(&read, dir.path(), input).await,
        ok("héllo wörld ✓\n日本語")
    );
    // A blank last line is a line.
    dir.write("b.txt", "a\n\n");
    assert_eq!(
        run(&read, dir.path(), json!({"path": "b.txt"})).await,
        ok("a\n")
    );
}

#[tokio::test]
async fn read_drops_carriage_returns_before_newlines_and_decodes_invalid_utf8_lossily() {
    let dir = TempDir::new();
    dir.write("crlf.txt", "a\r\nb\r\n");
    let read = ReadTool::new().unwrap();
    assert_eq!(
        run(&read, dir.path(), json!({"path": "crlf.txt"})).await,
        ok("a\nb")
    );
    dir.write("latin1.txt", b"caf\xe9\n");
    assert_eq!(
        run(&read, dir.path(), json!({"path": "latin1.txt"})).await,
        ok("caf\u{fffd}")
    );
}

#[tokio::test]
async fn read_offset_and_limit_select_lines_with_continuation_notices() {
    let dir = TempDir::new();
    dir.write("n.txt", numbered(10));
    let read = ReadTool::new().unwrap();
    let call = |offset: Value, limit: Value| {
        run(
            &read,
            dir.path(),
            json!({"label": "l", "path": "n.txt", "offset": offset, "limit": limit}),
        )
    };
    assert_eq!(
        call(json!(3), json!(2)).await,
        ok("3\n4\n\n[6 more lines in file. Use offset=5 to continue.]")
    );
    assert_eq!(
        call(json!(9), json!(1)).await,
        ok("9\n\n[1 more line in file. Use offset=10 to continue.]")
    );
    // Limit alone starts at line 1.
    assert_eq!(
        call(Value::Null, json!(8)).await,
        ok("1\n2\n3\n4\n5\n6\n7\n8\n\n[2 more lines in file. Use offset=9 to continue.]")
    );
    // A limit reaching the end (or past it) says nothing more.
    assert_eq!(call(json!(9), json!(2)).await, ok("9\n10"));
    assert_eq!(call(json!(9), json!(50)).await, ok("9\n10"));
    assert_eq!(call(json!(10), Value::Null).await, ok("10"));
    // Fractions round down; offsets and limits below 1 count as 1.
    assert_eq!(
        call(json!(2.7), json!(1.9)).await,
        ok("2\n\n[8 more lines in file. Use offset=3 to continue.]")
    );
    assert_eq!(
        call(json!(-4), json!(0)).await,
        ok("1\n\n[9 more lines in file. Use offset=2 to continue.]")
    );
}

#[tokio::test]
async fn read_offset_beyond_the_end_is_an_error_even_for_an_empty_file() {
    let dir = TempDir::new();
    dir.write("n.txt", numbered(10));
    dir.write("empty.txt", "");
    let read = ReadTool::new().unwrap();
    assert_eq!(
        run(
            &read,
            dir.path(),
            json!({"path": "n.txt", "offset": 11, "limit": null})
        )
        .await,
        err("Offset 11 is beyond end of file (10 lines total)")
    );
    assert_eq!(
        run(&read, dir.path(), json!({"path": "n.txt", "offset": 11.5})).await,
        err("Offset 11 is beyond end of file (10 lines total)")
    );
    assert_eq!(
        run(
            &read,
            dir.path(),
            json!({"path": "empty.txt", "offset": null})
        )
        .await,
        err("Offset 1 is beyond end of file (0 lines total)")
    );
}

#[tokio::test]
async fn read_truncates_at_2000_lines_with_a_notice() {
    let dir = TempDir::new();
    dir.write("long.txt", numbered(2500));
    let read = ReadTool::new().unwrap();
    let out = run(&read, dir.path(), json!({"path": "long.txt"})).await;
    let expected = format!(
        "{}\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]",
        numbered(2000).trim_end()
    );
    assert_eq!(out, ok(expected));
    let out = run(
        &read,
        dir.path(),
        json!({"path": "long.txt", "offset": 101}),
    )
    .await;
    let lines = numbered_from(101, 2100);
    let expected = format!(
        "{}\n\n[Showing lines 101-2100 of 2500. Use offset=2101 to continue.]",
        lines.trim_end()
    );
    assert_eq!(out, ok(expected));
}

#[tokio::test]
async fn read_truncates_at_50kb_on_whole_multibyte_lines() {
    let dir = TempDir::new();
    // 100 lines of 1000 bytes (500 two-byte characters): 51 lines and their 50 newlines fit
    // in 51200 bytes, 52 do not.
    let line = "é".repeat(500);
    let content = format!("{line}\n").repeat(100);
    dir.write("wide.txt", &content);
    let read = ReadTool::new().unwrap();
    let out = run(&read, dir.path(), json!({"path": "wide.txt", "offset": 1})).await;
    let kept = vec![line.as_str(); 51].join("\n");
    assert_eq!(
        out,
        ok(format!(
            "{kept}\n\n[Showing lines 1-51 of 100 (50.0KB limit). Use offset=52 to continue.]"
        ))
    );
    // A user limit that the byte budget cuts first gets the byte notice, not "more lines".
    let out = run(
        &read,
        dir.path(),
        json!({"path": "wide.txt", "offset": 41, "limit": 55}),
    )
    .await;
    let kept = vec![line.as_str(); 51].join("\n");
    assert_eq!(
        out,
        ok(format!(
            "{kept}\n\n[Showing lines 41-91 of 100 (50.0KB limit). Use offset=92 to continue.]"
        ))
    );
}

#[tokio::test]
async fn read_an_over_long_first_line_points_to_sed() {
    let dir = TempDir::new();
    dir.write("big.txt", format!("{}\nshort\n", "x".repeat(60_000)));
    let read = ReadTool::new().unwrap();
    assert_eq!(
        run(&read, dir.path(), json!({"path": "big.txt"})).await,
        ok(
            "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.txt | head -c 51200]"
        )
    );
    // The line named is the first one read, and the path is the one given.
    dir.write("sub/big2.txt", format!("a\n{}\n", "é".repeat(30_000)));
    assert_eq!(
        run(
            &read,
            dir.path(),
            json!({"path": "./sub/big2.txt", "offset": 2})
        )
        .await,
        ok(
            "[Line 2 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '2p' ./sub/big2.txt | head -c 51200]"
        )
    );
    assert_eq!(
        run(&read, dir.path(), json!({"path": "big.txt", "offset": 2})).await,
        ok("short")
    );
}

#[tokio::test]
async fn read_errors_name_the_path_as_given() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("a_dir")).unwrap();
    let read = ReadTool::new().unwrap();
    assert_eq!(
        run(&read, dir.path(), json!({"path": "missing.txt"})).await,
        err("File not found: missing.txt")
    );
    assert_eq!(
        run(&read, dir.path(), json!({"path": "a_dir"})).await,
        err("Cannot read file: a_dir is a directory")
    );
    assert_eq!(
        run(&read, dir.path(), json!({"path": ""})).await,
        err("No path provided")
    );
    assert_eq!(
        run(&read, dir.path(), json!({"label": "l"})).await,
        err("No path provided")
    );
}

#[tokio::test]
async fn read_resolves_relative_paths_against_the_conversation_directory() {
    let dir = TempDir::new();
    dir.write("notes.txt", "in the chat dir\n");
    dir.write("work/notes.txt", "in the cwd\n");
    let ctx = context(dir.path(), &dir.path().join("work"), "read");
    let read = ReadTool::new().unwrap();
    assert_eq!(
        read.execute(json!({"path": "notes.txt"}), &ctx).await,
        ok("in the chat dir")
    );
    let absolute = dir.path().join("work/notes.txt");
    assert_eq!(
        read.execute(json!({"path": absolute.to_str().unwrap()}), &ctx)
            .await,
        ok("in the cwd")
    );
}

#[tokio::test]
async fn read_returns_binary_files_as_file_references() {
    let dir = TempDir::new();
    dir.write("img/cat.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    dir.write("doc.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n");
    dir.write("photo.jpg", b"\xFF\xD8\xFF\xE0\0\x10JFIF");
    dir.write("blob.bin", b"text first\0then binary");
    dir.write("my pics/a#1.gif", b"GIF89a\x01\0\x01\0");
    let read = ReadTool::new().unwrap();
    let call = |path: &str| run(&read, dir.path(), json!({"path": path}));
    assert_eq!(
        call("img/cat.png").await,
        ok("@./img/cat.png;type=image/png")
    );
    assert_eq!(
        call("./img/cat.png").await,
        ok("@./img/cat.png;type=image/png")
    );
    assert_eq!(
        call("img/../doc.pdf").await,
        ok("@./img/../doc.pdf;type=application/pdf")
    );
    assert_eq!(call("photo.jpg").await, ok("@./photo.jpg;type=image/jpeg"));
    assert_eq!(
        call("blob.bin").await,
        ok("@./blob.bin;type=application/octet-stream")
    );
    assert_eq!(
        call("my pics/a#1.gif").await,
        ok("@./my%20pics/a%231.gif;type=image/gif")
    );
    // An absolute path becomes `@//abs/path`.
    let absolute = dir.path().join("img/cat.png");
    let absolute = absolute.to_str().unwrap();
    assert_eq!(
        call(absolute).await,
        ok(format!("@/{absolute};type=image/png"))
    );
    // The sniffing looks at content, not at names: a PNG named .txt is an image, text named
    // .png is text, offsets do not matter for binary files.
    dir.write("actually.txt", b"\x89PNG\r\n\x1a\n");
    dir.write("not.png", "just text\n");
    assert_eq!(
        call("actually.txt").await,
        ok("@./actually.txt;type=image/png")
    );
    assert_eq!(call("not.png").await, ok("just text"));
    assert_eq!(
        run(&read, dir.path(), json!({"path": "doc.pdf", "offset": 99})).await,
        ok("@./doc.pdf;type=application/pdf")
    );
}
