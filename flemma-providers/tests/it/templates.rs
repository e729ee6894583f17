//! Templates and `@./file` references while building prompts, on real files.

use std::sync::Arc;

use flemma_ids::Severity;
use flemma_providers::{
    FilePart, MiniJinjaEngine, Part, Prompt, PromptBuilder, PromptDiagnosticKind, PromptRole,
    anthropic_request, body_to_string, chat_completions_request, openai_responses_request,
    vertex_request,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use crate::{TempDir, options};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const PDF: &[u8] = b"%PDF-1.4\n%fake\n";

fn text(t: &str) -> Part<'static> {
    Part::text(t.to_owned())
}

fn vars(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Builds the prompt of `chat`, saved as `talk.chat` in `dir`.
fn build(dir: &TempDir, chat: &str, builder: PromptBuilder) -> Prompt<'static> {
    let path = dir.write("talk.chat", chat);
    builder
        .chat_path(path)
        .build(&flemma_ast::parse(chat))
        .into_owned()
}

fn user_parts<'p>(prompt: &'p Prompt<'_>) -> &'p [Part<'p>] {
    assert_eq!(prompt.messages[0].role, PromptRole::User);
    &prompt.messages[0].parts
}

#[test]
fn expressions_see_the_variables_the_file_and_its_directory() {
    let dir = TempDir::new("expressions");
    let prompt = build(
        &dir,
        "@You:\nIn {{ __dirname }}: {{ __filename }} for {{ who }}; {{ n + 1 }}{{ missing }}.\n",
        PromptBuilder::new().variables(vars(json!({"who": "Ada", "n": 41}))),
    );
    let root = dir.join("").display().to_string();
    let root = root.trim_end_matches('/');
    assert_eq!(
        user_parts(&prompt),
        [text(&format!("In {root}: {root}/talk.chat for Ada; 42."))]
    );
    assert_eq!(prompt.diagnostics, vec![]);
}

#[test]
fn control_flow_and_trim_dashes_follow_jinja() {
    let dir = TempDir::new("control");
    let prompt = build(
        &dir,
        "@You:\nTodo:\n{% for item in items -%}\n- {{ item }}\n{% endfor -%}\n{%- if done %}all done{% else %}more to do{% endif %}\n",
        PromptBuilder::new().variables(vars(json!({"items": ["a", "b"], "done": false}))),
    );
    assert_eq!(user_parts(&prompt), [text("Todo:\n- a\n- b\nmore to do")]);
}

#[test]
fn include_renders_the_file_as_a_template_in_its_own_directory() {
    let dir = TempDir::new("include");
    dir.write(
        "parts/greeting.txt",
        "Hello {{ who }} from {{ __filename }}{{ include('sig.txt') }}",
    );
    dir.write("parts/sig.txt", " -- {{ 'signed' | upper }}");
    let prompt = build(
        &dir,
        "@You:\n{{ include('./parts/greeting.txt') }}\n",
        PromptBuilder::new().variables(vars(json!({"who": "Ada"}))),
    );
    let greeting = dir.join("parts/greeting.txt");
    assert_eq!(
        user_parts(&prompt),
        [text(&format!(
            "Hello Ada from {} -- SIGNED",
            greeting.display()
        ))]
    );
}

#[test]
fn include_cycles_are_errors_and_the_text_is_sent_as_written() {
    let dir = TempDir::new("cycle");
    dir.write("loop1.txt", "one {{ include('loop2.txt') }}");
    dir.write("loop2.txt", "two {{ include('./loop1.txt') }}");
    let chat = "@You:\nStart\n\n{{ include('loop1.txt') }}\n";
    let prompt = build(&dir, chat, PromptBuilder::new());
    assert_eq!(
        user_parts(&prompt),
        [text("Start\n\n{{ include('loop1.txt') }}")]
    );
    assert!(prompt.has_errors());
    let [diagnostic] = prompt.diagnostics.as_slice() else {
        panic!("{:?}", prompt.diagnostics)
    };
    assert_eq!(diagnostic.kind, PromptDiagnosticKind::Template);
    assert_eq!(diagnostic.severity, Severity::Error);
    assert_eq!(diagnostic.line, 2);
    let loop1 = std::fs::canonicalize(dir.join("loop1.txt")).unwrap();
    let loop2 = std::fs::canonicalize(dir.join("loop2.txt")).unwrap();
    assert_eq!(
        diagnostic.message,
        format!(
            "Template error (the text is sent as written): circular include: {} -> {} -> {}",
            loop1.display(),
            loop2.display(),
            loop1.display()
        )
    );
}

#[test]
fn template_errors_point_at_their_line() {
    let dir = TempDir::new("error-line");
    let chat = "@You:\nfirst {{ 1 }}\nsecond\nthird {{ nope( }}\n";
    let prompt = build(&dir, chat, PromptBuilder::new());
    assert_eq!(prompt.diagnostics.len(), 1, "{:?}", prompt.diagnostics);
    assert_eq!(prompt.diagnostics[0].line, 4);
    assert!(
        prompt.diagnostics[0].message.contains("syntax error"),
        "{}",
        prompt.diagnostics[0].message
    );
    assert_eq!(
        user_parts(&prompt),
        [text("first {{ 1 }}\nsecond\nthird {{ nope( }}")]
    );
}

#[test]
fn file_references_become_file_parts_by_mime_type() {
    let dir = TempDir::new("references");
    dir.write("img/cat.png", PNG);
    dir.write("doc.pdf", PDF);
    dir.write("notes.md", "# Notes");
    dir.write("my file.txt", "spaced");
    dir.write("blob.bin", [0u8, 1, 2, 3]);
    dir.write("raw", b"not really a png");
    let prompt = build(
        &dir,
        "@You:\nLook at @./img/cat.png and @./doc.pdf, @./notes.md; @./my%20file.txt @./blob.bin @./raw;type=image/png.\n",
        PromptBuilder::new(),
    );
    let b64 =
        |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    assert_eq!(
        user_parts(&prompt),
        [
            text("Look at "),
            Part::File(FilePart::Image {
                mime_type: "image/png".into(),
                data: b64(PNG),
                filename: "./img/cat.png".into(),
            }),
            text(" and "),
            Part::File(FilePart::Pdf {
                mime_type: "application/pdf".into(),
                data: b64(PDF),
                filename: "./doc.pdf".into(),
            }),
            text(", "),
            Part::File(FilePart::TextFile {
                mime_type: "text/markdown".into(),
                text: "# Notes".into(),
                filename: "./notes.md".into(),
            }),
            text("; "),
            Part::File(FilePart::TextFile {
                mime_type: "text/plain".into(),
                text: "spaced".into(),
                filename: "./my file.txt".into(),
            }),
            // Blank text between parts is not sent.
            Part::File(FilePart::Unsupported {
                mime_type: "application/octet-stream".into(),
                filename: "./blob.bin".into(),
            }),
            Part::File(FilePart::Image {
                mime_type: "image/png".into(),
                data: b64(b"not really a png"),
                filename: "./raw".into(),
            }),
            text("."),
        ]
    );
    assert_eq!(prompt.diagnostics, vec![]);
}

#[test]
fn a_missing_file_stays_text_with_a_warning() {
    let dir = TempDir::new("missing");
    let prompt = build(
        &dir,
        "@You:\nSee @./gone.png please\n",
        PromptBuilder::new(),
    );
    assert_eq!(user_parts(&prompt), [text("See @./gone.png please")]);
    let [diagnostic] = prompt.diagnostics.as_slice() else {
        panic!("{:?}", prompt.diagnostics)
    };
    assert_eq!(diagnostic.kind, PromptDiagnosticKind::File);
    assert_eq!(diagnostic.severity, Severity::Warning);
    assert_eq!(diagnostic.line, 2);
    // The path, then the I/O error, once.
    let not_found = std::fs::read(dir.join("gone.png")).unwrap_err().to_string();
    assert_eq!(
        diagnostic.message,
        format!(
            "File reference @./gone.png not attached: cannot read '{}': {not_found}",
            dir.join("gone.png").display()
        )
    );
    assert!(!prompt.has_errors());

    // Each warning points at its reference's line, templates or not.
    let prompt = build(
        &dir,
        "@You:\n{{ 1 }}\n\n  @./a.png and\n\n{{- 2 -}}\n\n@./b.png\n",
        PromptBuilder::new(),
    );
    let lines: Vec<u32> = prompt.diagnostics.iter().map(|d| d.line).collect();
    assert_eq!(lines, [4, 8], "{:?}", prompt.diagnostics);
}

#[test]
fn runaway_templates_and_huge_files_are_refused() {
    let dir = TempDir::new("limits");
    let prompt = build(
        &dir,
        "@You:\n{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}\n",
        PromptBuilder::new(),
    );
    assert!(prompt.has_errors(), "{:?}", prompt.diagnostics);
    assert!(
        prompt.diagnostics[0].message.contains("fuel"),
        "{}",
        prompt.diagnostics[0].message
    );

    // A sparse file over the limit is not read.
    let huge = dir.join("huge.png");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(flemma_providers::MAX_FILE_BYTES + 1)
        .unwrap();
    let prompt = build(&dir, "@You:\nLook: @./huge.png\n", PromptBuilder::new());
    assert_eq!(user_parts(&prompt), [text("Look: @./huge.png")]);
    assert!(
        prompt.diagnostics[0]
            .message
            .contains("more than the 33554432 bytes"),
        "{}",
        prompt.diagnostics[0].message
    );
}

#[test]
fn binary_include_and_references_inside_control_flow() {
    let dir = TempDir::new("binary-include");
    dir.write("a.png", PNG);
    dir.write("b.png", PNG);
    let prompt = build(
        &dir,
        "@You:\n{{ include('a.png', binary=true) }}{% if false %}@./b.png{% endif %}{{ include('./b.png', {'binary': true, 'mime': 'image/x-test'}) }}\n",
        PromptBuilder::new(),
    );
    let mimes: Vec<&str> = user_parts(&prompt)
        .iter()
        .map(|p| match p {
            Part::File(f) => f.mime_type(),
            other => panic!("{other:?}"),
        })
        .collect();
    // The reference inside the false branch is not attached.
    assert_eq!(mimes, ["image/png", "image/x-test"]);
}

#[test]
fn file_access_keeps_reads_inside_a_directory() {
    let dir = TempDir::new("access");
    dir.write("outside.txt", "secret");
    dir.write("work/inside.txt", "fine");
    let work = dir.join("work");
    std::os::unix::fs::symlink(dir.join("outside.txt"), work.join("link.txt")).unwrap();
    let chat = "@You:\n@./inside.txt @../outside.txt @./link.txt @./missing.txt\n\n@Assistant:\nOk.\n\n@You:\n{{ include('../outside.txt') }}\n";
    let path = dir.write("work/talk.chat", chat);
    let doc = flemma_ast::parse(chat);
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(flemma_providers::FileAccess::within(work.clone()))
        .build(&doc);
    let parts = &prompt.messages[0].parts;
    assert!(
        matches!(&parts[0], Part::File(FilePart::TextFile { text, .. }) if text == "fine"),
        "{parts:?}"
    );
    let messages: Vec<&str> = prompt
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(
        messages[0].contains("@../outside.txt not attached: reading"),
        "{}",
        messages[0]
    );
    assert!(
        messages[0].contains("is not allowed here: it is outside the conversation's project and store (templates.file_access = \"any\""),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("@./link.txt not attached: reading"),
        "{}",
        messages[1]
    );
    assert!(
        messages[2].contains("@./missing.txt not attached: cannot read"),
        "{}",
        messages[2]
    );
    assert!(
        messages[3].contains("is not allowed here"),
        "{}",
        messages[3]
    );
    assert!(prompt.has_errors());
    // Nothing of the outside file reached the prompt.
    assert!(!format!("{:?}", prompt.messages).contains("secret"));

    // The default reads inside the project only (here `work`, which no repository holds);
    // `FileAccess::Any` reads anything the process can.
    let prompt = PromptBuilder::new().chat_path(&path).build(&doc);
    assert!(!format!("{:?}", prompt.messages).contains("secret"));
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(flemma_providers::FileAccess::Any)
        .build(&doc);
    assert!(format!("{:?}", prompt.messages).contains("secret"));
}

/// The messages of a prompt's diagnostics, in order.
fn diagnostic_messages(prompt: &Prompt<'_>) -> Vec<String> {
    prompt
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn references_reach_the_same_decision_however_often_their_directories_are_looked_up() {
    let dir = TempDir::new("lookups");
    dir.write("outside/secret.txt", "hidden words");
    dir.write("work/src/a.txt", "alpha");
    dir.write("work/sub/b.txt", "beta");
    let work = dir.join("work");
    // A linked directory that leads out of bounds, one that stays inside, a linked file.
    std::os::unix::fs::symlink(dir.join("outside"), work.join("out")).unwrap();
    std::os::unix::fs::symlink(work.join("sub"), work.join("in")).unwrap();
    std::os::unix::fs::symlink(work.join("src/a.txt"), work.join("src/to_a.txt")).unwrap();
    // Each reference five times: the later ones are answered from what the build learnt
    // (`src` is listed once references looked into it often).
    let refs = "@./src/a.txt @./src/gone.txt @./gone/x.txt @./gone/deeper/y.txt \
                @./out/secret.txt @./in/b.txt @./src/to_a.txt @./sub @./src/a.txt/x";
    let chat = format!("@You:\n{}\n", [refs; 5].join("\n"));
    let path = dir.write("work/talk.chat", &chat);
    let doc = flemma_ast::parse(&chat);
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(flemma_providers::FileAccess::within(work.clone()))
        .build(&doc);
    let texts: Vec<&str> = prompt.messages[0]
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::File(FilePart::TextFile { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["alpha", "beta", "alpha"].repeat(5));
    assert!(!format!("{:?}", prompt.messages).contains("hidden words"));
    let io = |rest: &str| std::fs::read(work.join(rest)).unwrap_err().to_string();
    let denied = |rest: &str| {
        format!(
            "reading '{}' is not allowed here: it is outside the conversation's project and store (templates.file_access = \"any\" or templates.allowed_roots widens it)",
            work.join(rest).display()
        )
    };
    let cannot = |rest: &str| format!("cannot read '{}': {}", work.join(rest).display(), io(rest));
    let once = [
        format!(
            "File reference @./src/gone.txt not attached: {}",
            cannot("src/gone.txt")
        ),
        format!(
            "File reference @./gone/x.txt not attached: {}",
            cannot("gone/x.txt")
        ),
        format!(
            "File reference @./gone/deeper/y.txt not attached: {}",
            cannot("gone/deeper/y.txt")
        ),
        format!(
            "File reference @./out/secret.txt not attached: {}",
            denied("out/secret.txt")
        ),
        format!("File reference @./sub not attached: {}", cannot("sub")),
        format!(
            "File reference @./src/a.txt/x not attached: {}",
            cannot("src/a.txt/x")
        ),
    ];
    let five: Vec<String> = (0..5).flat_map(|_| once.iter().cloned()).collect();
    assert_eq!(diagnostic_messages(&prompt), five);

    // With no directory to read from, an existing file is refused as well, and so is a
    // missing one: refused, not missing.
    let doc = flemma_ast::parse("@You:\n@./src/a.txt @./src/gone.txt\n");
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(flemma_providers::FileAccess::Within(Vec::new()))
        .build(&doc);
    assert_eq!(
        diagnostic_messages(&prompt),
        [
            format!(
                "File reference @./src/a.txt not attached: {}",
                denied("src/a.txt")
            ),
            format!(
                "File reference @./src/gone.txt not attached: {}",
                denied("src/gone.txt")
            ),
        ]
    );
}

/// A project (a repository) whose conversation `read` a file of the project; the file's text
/// (a template, since `read` emits templates) names files outside the project.
fn read_result_project(dir: &TempDir, body: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("repo/.git")).unwrap();
    dir.write("repo/docs/inside.txt", "inside text");
    dir.write("outside/secret.txt", "outside secret");
    std::os::unix::fs::symlink(
        dir.join("outside/secret.txt"),
        dir.join("repo/docs/link.txt"),
    )
    .unwrap();
    let chat = format!(
        "@You:\nRead it.\n\n@Assistant:\n**Tool Use:** `read` (`toolu_r`)\n```json\n\
         {{\"label\": \"r\", \"path\": \"./notes.txt\"}}\n```\n\n\
         @You:\n**Tool Result:** `toolu_r`\n\n```\n{body}\n```\n"
    );
    dir.write("repo/docs/talk.chat", &chat)
}

fn tool_result_parts<'p>(prompt: &'p Prompt<'_>) -> &'p [Part<'p>] {
    prompt
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolResult { parts, .. } => Some(parts.as_slice()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_read_result_cannot_reach_files_outside_the_project_by_default() {
    let dir = TempDir::new("read-outside");
    let outside = dir.join("outside/secret.txt");
    let body = format!(
        "env: @//proc/self/environ;type=text/plain\nhost: @//etc/hostname\nfile: @//{}\nlink: @./link.txt\nok: @./inside.txt",
        outside.display().to_string().trim_start_matches('/')
    );
    let path = read_result_project(&dir, &body);
    let doc = flemma_ast::parse(&std::fs::read_to_string(&path).unwrap());
    let prompt = PromptBuilder::new().chat_path(&path).build(&doc);
    let parts = tool_result_parts(&prompt);
    // Only the file inside the project is attached; the others stay text.
    let files: Vec<&FilePart> = parts
        .iter()
        .filter_map(|p| match p {
            Part::File(f) => Some(f),
            _ => None,
        })
        .collect();
    assert!(
        matches!(files.as_slice(), [FilePart::TextFile { text, .. }] if text == "inside text"),
        "{parts:?}"
    );
    let sent = format!("{:?}", prompt.messages);
    assert!(!sent.contains("outside secret"), "{sent}");
    let refused: Vec<&str> = prompt
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .filter(|m| m.contains("templates.file_access = \"any\""))
        .collect();
    assert_eq!(refused.len(), 4, "{:?}", prompt.diagnostics);
    assert!(
        refused[0].contains("@//proc/self/environ;type=text/plain not attached"),
        "{}",
        refused[0]
    );
    assert!(
        refused[3].contains("@./link.txt not attached"),
        "{}",
        refused[3]
    );

    // `templates.file_access = "any"` is the spec's behaviour: every file is attached.
    let mut config = flemma_config::Config::new();
    config
        .set(
            flemma_config::Layer::Runtime,
            "templates.file_access",
            "any",
        )
        .unwrap();
    let access =
        flemma_providers::FileAccess::from_options(&config.options().unwrap().templates, None);
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(access)
        .build(&doc);
    let sent = format!("{:?}", prompt.messages);
    assert!(sent.contains("outside secret"), "{sent}");
    assert_eq!(
        tool_result_parts(&prompt)
            .iter()
            .filter(|p| matches!(p, Part::File(_)))
            .count(),
        5
    );
}

#[test]
fn a_read_result_cannot_include_files_outside_the_project_by_default() {
    let dir = TempDir::new("include-outside");
    let outside = dir.join("outside/secret.txt");
    let body = format!(
        "{{{{ include(\"/etc/hostname\") }}}} {{{{ include(\"{}\") }}}}",
        outside.display()
    );
    let path = read_result_project(&dir, &body);
    let doc = flemma_ast::parse(&std::fs::read_to_string(&path).unwrap());
    let prompt = PromptBuilder::new().chat_path(&path).build(&doc);
    // The template fails, so the text is sent as written.
    assert_eq!(tool_result_parts(&prompt), [Part::text(body.clone())]);
    assert_eq!(prompt.diagnostics.len(), 1, "{:?}", prompt.diagnostics);
    let message = &prompt.diagnostics[0].message;
    assert!(
        message.contains("reading '/etc/hostname' is not allowed here"),
        "{message}"
    );
    assert!(
        message.contains("templates.file_access = \"any\""),
        "{message}"
    );

    // Inside the project, and through `templates.allowed_roots`, `include()` reads.
    let inside = "{{ include(\"./inside.txt\") }}";
    let inside_dir = TempDir::new("include-inside");
    let path = read_result_project(&inside_dir, inside);
    let doc = flemma_ast::parse(&std::fs::read_to_string(&path).unwrap());
    let prompt = PromptBuilder::new().chat_path(&path).build(&doc);
    assert_eq!(tool_result_parts(&prompt), [Part::text("inside text")]);
    let mut config = flemma_config::Config::new();
    config
        .append(
            flemma_config::Layer::Runtime,
            "templates.allowed_roots",
            dir.join("outside").to_str().unwrap(),
        )
        .unwrap();
    let access =
        flemma_providers::FileAccess::from_options(&config.options().unwrap().templates, None);
    let allowed_dir = TempDir::new("include-allowed");
    let path = read_result_project(
        &allowed_dir,
        &format!("{{{{ include(\"{}\") }}}}", outside.display()),
    );
    let doc = flemma_ast::parse(&std::fs::read_to_string(&path).unwrap());
    let prompt = PromptBuilder::new()
        .chat_path(&path)
        .file_access(access)
        .build(&doc);
    assert_eq!(tool_result_parts(&prompt), [Part::text("outside secret")]);
}

#[test]
fn text_that_looks_like_a_file_marker_stays_text() {
    let dir = TempDir::new("markers");
    dir.write("a.png", PNG);
    let lookalike = "\u{E000}flemma-file:0\u{E001}";
    let prompt = build(
        &dir,
        &format!("@You:\n@./a.png\n\n@Assistant:\nOk.\n\n@You:\n{{{{ 1 }}}} {lookalike}\n"),
        PromptBuilder::new(),
    );
    assert!(matches!(prompt.messages[0].parts[..], [Part::File(_)]));
    assert_eq!(prompt.messages[2].parts, [text(&format!("1 {lookalike}"))]);
}

#[test]
fn system_prompts_are_rendered_and_name_binary_files() {
    let dir = TempDir::new("system");
    dir.write("rules.md", "Be brief.");
    dir.write("logo.png", PNG);
    let prompt = build(
        &dir,
        "@System:\n{{ role }}. @./rules.md @./logo.png\n\n@You:\nHi\n",
        PromptBuilder::new().variables(vars(json!({"role": "You help"}))),
    );
    assert_eq!(
        prompt.system.as_deref(),
        Some("You help. Be brief. [binary file: ./logo.png (image/png)]")
    );
    assert_eq!(prompt.diagnostics.len(), 1);
    assert_eq!(prompt.diagnostics[0].kind, PromptDiagnosticKind::File);
}

const TOOL_CHAT: &str = "@You:\nShow me the logo and the listing.\n\n@Assistant:\n**Tool Use:** `read` (`toolu_1`)\n\n```json\n{\"label\":\"logo\",\"path\":\"logo.png\"}\n```\n\n**Tool Use:** `bash` (`toolu_2`)\n\n```json\n{\"label\":\"ls\",\"command\":\"ls\"}\n```\n\n@You:\n**Tool Result:** `toolu_1`\n\n```\n@./logo.png;type=image/png\n```\n\n**Tool Result:** `toolu_2`\n\n```\n@./logo.png {{ not_rendered }}\n```\n\nWhat is it?\n";

#[test]
fn only_template_tools_get_their_results_rendered() {
    let dir = TempDir::new("emits-template");
    dir.write("logo.png", PNG);
    let prompt = build(&dir, TOOL_CHAT, PromptBuilder::new());
    let parts = &prompt.messages[2].parts;
    let Part::ToolResult { parts: read, .. } = &parts[0] else {
        panic!("{parts:?}")
    };
    assert!(
        matches!(read.as_slice(), [Part::File(FilePart::Image { filename, .. })] if filename == "./logo.png")
    );
    let Part::ToolResult { parts: bash, .. } = &parts[1] else {
        panic!("{parts:?}")
    };
    assert_eq!(bash.as_slice(), [text("@./logo.png {{ not_rendered }}")]);

    // With no template tool, the read result is sent as written too.
    let prompt = build(
        &dir,
        TOOL_CHAT,
        PromptBuilder::new().template_tools(Vec::<String>::new()),
    );
    let Part::ToolResult { parts: read, .. } = &prompt.messages[2].parts[0] else {
        panic!()
    };
    assert_eq!(read.as_slice(), [text("@./logo.png;type=image/png")]);
}

#[test]
fn request_bodies_carry_files_for_every_provider() {
    let dir = TempDir::new("bodies");
    dir.write("logo.png", PNG);
    dir.write("spec.pdf", PDF);
    dir.write("blob.bin", [0u8, 159]);
    let chat = TOOL_CHAT.replace(
        "What is it?",
        "What is it? Compare @./spec.pdf and @./blob.bin.",
    );
    let prompt = build(
        &dir,
        &chat,
        PromptBuilder::new().engine(Arc::new(MiniJinjaEngine::new())),
    );
    let bodies = [
        (
            "anthropic",
            body_to_string(
                &anthropic_request(&prompt, &options("claude-sonnet-4-5")).to_value(),
                &["system", "tools", "messages"],
            ),
        ),
        (
            "openai",
            body_to_string(
                &openai_responses_request(&prompt, &options("gpt-5")).to_value(),
                &["tools", "input"],
            ),
        ),
        (
            "openai-chat",
            body_to_string(
                &chat_completions_request(&prompt, &options("gpt-4.1")).to_value(),
                &["tools", "messages"],
            ),
        ),
        (
            "vertex",
            body_to_string(
                &vertex_request(&prompt, &options("gemini-2.5-pro")).to_value(),
                &["tools", "contents"],
            ),
        ),
    ];
    for (provider, body) in bodies {
        let value: Value = serde_json::from_str(&body).unwrap();
        // Only the conversation: the tool declarations are pinned by the golden requests.
        let conversation = ["messages", "input", "contents"]
            .iter()
            .find_map(|k| value.get(*k))
            .unwrap();
        insta::assert_snapshot!(
            format!("files_{provider}"),
            serde_json::to_string_pretty(conversation).unwrap()
        );
    }
}

#[cfg(feature = "lua")]
mod lua {
    use super::{
        Arc, FilePart, PNG, Part, PromptBuilder, TempDir, build, json, text, user_parts, vars,
    };
    use flemma_providers::LuaEngine;
    use pretty_assertions::assert_eq;

    fn lua() -> PromptBuilder {
        PromptBuilder::new().engine(Arc::new(LuaEngine::new()))
    }

    #[test]
    fn lua_templates_render_as_the_reference_writes_them() {
        let dir = TempDir::new("lua");
        dir.write(
            "part.txt",
            "[{{ who:upper() }} in {{ __filename:match('[^/]+$') }}]",
        );
        dir.write("a.png", PNG);
        let prompt = build(
            &dir,
            "@You:\n{% for i = 1, 3 do %}{{ i }}{% end %} {{ include('part.txt') }} {{ #os.date('%Y-%m-%d') }} {{ nothing }}{{ include('a.png', {binary = true}) }}\n",
            lua().variables(vars(json!({"who": "ada"}))),
        );
        assert_eq!(prompt.diagnostics, vec![]);
        let parts = user_parts(&prompt);
        assert_eq!(parts[0], text("123 [ADA in part.txt] 10 "));
        assert!(matches!(&parts[1], Part::File(FilePart::Image { .. })));
    }

    #[test]
    fn lua_errors_point_at_their_line_and_the_sandbox_holds() {
        let dir = TempDir::new("lua-errors");
        let prompt = build(
            &dir,
            "@You:\nok {{ 1 }}\n\n{{ io.open('/etc/passwd') }}\n",
            lua(),
        );
        assert_eq!(prompt.diagnostics.len(), 1, "{:?}", prompt.diagnostics);
        assert_eq!(prompt.diagnostics[0].line, 4);
        assert!(
            prompt.diagnostics[0].message.contains("io"),
            "{}",
            prompt.diagnostics[0].message
        );

        for code in ["os.execute('true')", "require('os')", "load('return 1')"] {
            let prompt = build(&dir, &format!("@You:\n{{{{ {code} }}}}\n"), lua());
            assert!(prompt.has_errors(), "{code}");
        }
        // A runaway loop is stopped.
        let prompt = build(&dir, "@You:\n{% while true do end %}\n", lua());
        assert!(
            prompt.diagnostics[0].message.contains("too long"),
            "{:?}",
            prompt.diagnostics
        );
    }

    #[test]
    fn lua_include_cycles_are_reported_as_cycles() {
        let dir = TempDir::new("lua-cycle");
        dir.write("loop1.txt", "{{ include('loop2.txt') }}");
        dir.write("loop2.txt", "{{ include('loop1.txt') }}");
        let prompt = build(&dir, "@You:\n{{ include('loop1.txt') }}\n", lua());
        assert!(
            prompt.diagnostics[0].message.contains("circular include"),
            "{:?}",
            prompt.diagnostics
        );
    }
}
