//! Spec §11.2-11.3: presets, templates, inline expansion, namespace collapse, name
//! de-duplication, escaping and the store directory.

use std::path::{Path, PathBuf};

use flemma_store::{Store, collapse_namespaces, dedupe_name, escape_id, expand_inline, flatten};
use pretty_assertions::assert_eq;

use crate::{TempDir, env, jid, options, options_with_format, store, tid, tn};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn chat_preset_example() {
    let store = store(
        &options(),
        Some(Path::new("~/notes/example.chat")),
        &[("HOME", "/home/ada")],
    );
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p("/home/ada/notes/.flemma/example.chat/tool_bash_toolu_01.txt")
    );
    assert_eq!(
        store.path_for(&jid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p("/home/ada/notes/.flemma/example.chat/job_bash_toolu_01.txt")
    );
    // Unknown name: empty.
    assert_eq!(
        store.path_for(&tid("toolu_01"), None).unwrap(),
        p("/home/ada/notes/.flemma/example.chat/tool__toolu_01.txt")
    );
}

#[test]
fn chat_preset_with_an_absolute_chat_path() {
    let store = store(
        &options(),
        Some(Path::new("/home/user/notes/example.chat")),
        &[],
    );
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p("/home/user/notes/.flemma/example.chat/tool_bash_toolu_01.txt")
    );
}

#[test]
fn chat_preset_with_a_bare_file_name_stays_relative() {
    // `example.chat` has no directory: `__dirname` is `.`, not the filesystem root.
    let store = store(&options(), Some(Path::new("example.chat")), &[]);
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p(".flemma/example.chat/tool_bash_toolu_01.txt")
    );
}

#[test]
fn state_preset_with_xdg_state_home() {
    let store = store(
        &options_with_format("$state"),
        Some(Path::new("/home/user/notes/example.chat")),
        &[("XDG_STATE_HOME", "/xdg/state"), ("HOME", "/home/user")],
    );
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p("/xdg/state/flemma/store/home--user--notes--example.chat/tool_bash_toolu_01.txt")
    );
}

#[test]
fn state_preset_without_xdg_state_home_falls_back_to_home() {
    let expected =
        p("/home/user/.flemma/store/home--user--notes--example.chat/tool_bash_toolu_01.txt");
    // `$HOME/.flemma/flemma/store` collapses to `$HOME/.flemma/store`.
    for pairs in [
        &[("HOME", "/home/user")][..],
        &[("HOME", "/home/user"), ("XDG_STATE_HOME", "")][..],
    ] {
        let store = store(
            &options_with_format("$state"),
            Some(Path::new("/home/user/notes/example.chat")),
            pairs,
        );
        assert_eq!(
            store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
            expected
        );
    }
}

#[test]
fn state_preset_flattens_the_expanded_chat_path() {
    // A chat path given with `~` is the same file as its expanded form.
    let store = store(
        &options_with_format("$state"),
        Some(Path::new("~/notes/example.chat")),
        &[("HOME", "/home/user")],
    );
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        p("/home/user/.flemma/store/home--user--notes--example.chat/tool_bash_toolu_01.txt")
    );
}

#[test]
fn flatten_example() {
    assert_eq!(
        flatten("/home/user/notes/example.chat"),
        "home--user--notes--example.chat"
    );
    let store = store(
        &options_with_format("/s/{{ flemma.path.flatten(__filename) }}"),
        Some(Path::new("/home/user/notes/example.chat")),
        &[],
    );
    assert_eq!(
        store.path_for(&tid("x"), None).unwrap(),
        p("/s/home--user--notes--example.chat")
    );
}

#[test]
fn path_helpers_in_templates() {
    let store = store(
        &options_with_format(
            "/s/{{ flemma.path.basename(__filename) }}/{{ flemma.path.dirname(__filename) }}/{{ flemma.path.resolve('/a/./b/../c') }}",
        ),
        Some(Path::new("/home/user/notes/example.chat")),
        &[],
    );
    assert_eq!(
        store.path_for(&tid("x"), None).unwrap(),
        p("/s/example.chat/home/user/notes/a/c")
    );
}

#[test]
fn unnamed_default_format() {
    let pid = std::process::id();
    let store = store(&options(), None, &[]);
    assert_eq!(
        store.path_for(&tid("toolu_01"), Some(&tn("bash"))).unwrap(),
        PathBuf::from(format!(
            "/tmp/flemma/unnamed/{pid}/1/tool_bash_toolu_01.txt"
        ))
    );
    let store = Store::new(&options(), None, "42")
        .unwrap()
        .with_env(env(&[("TMPDIR", "/var/scratch/")]));
    assert_eq!(
        store.path_for(&jid("toolu_01"), Some(&tn("bash"))).unwrap(),
        PathBuf::from(format!(
            "/var/scratch/flemma/unnamed/{pid}/42/job_bash_toolu_01.txt"
        ))
    );
    assert_eq!(
        store.directory().unwrap(),
        PathBuf::from(format!("/var/scratch/flemma/unnamed/{pid}/42"))
    );
}

#[test]
fn unnamed_format_refuses_presets() {
    for preset in ["$chat", "$state", "$other"] {
        let mut options = options();
        options.unnamed_path_format = preset.to_owned();
        let err = Store::new(&options, None, "1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Presets are not supported in unnamed_path_format (no chat file path to derive from)"
        );
        // A buffer with a file does not use it.
        Store::new(&options, Some(Path::new("/n/x.chat")), "1").unwrap();
    }
}

#[test]
fn unknown_preset() {
    let err = Store::new(
        &options_with_format("$x"),
        Some(Path::new("/n/x.chat")),
        "1",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown store preset '$x' (known: $chat, $state)"
    );
    // Not a preset: the whole value must be `$ALNUM+`.
    let store = store(
        &options_with_format("$ROOT/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[("ROOT", "/r")],
    );
    assert_eq!(store.path_for(&tid("i"), None).unwrap(), p("/r/i"));
}

#[test]
fn template_errors() {
    // A syntax error is reported when the store is created.
    let err = Store::new(
        &options_with_format("/s/{{ source"),
        Some(Path::new("/n/x.chat")),
        "1",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("Invalid store path format '/s/{{ source': "),
        "{err}"
    );
    assert!(err.contains("syntax error"), "{err}");

    // An undefined variable when a path is rendered.
    let store = store(
        &options_with_format("/s/{{ nope }}/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[],
    );
    let err = store.path_for(&tid("i"), None).unwrap_err().to_string();
    assert!(
        err.starts_with("Invalid store path format '/s/{{ nope }}/{{ id }}': "),
        "{err}"
    );
    assert!(err.contains("undefined"), "{err}");
    let err = store.directory().unwrap_err().to_string();
    assert!(err.starts_with("Invalid store path format '"), "{err}");
}

#[test]
fn id_escaping_examples() {
    let cases = [
        ("bash:8", "bash--3a8"),
        ("has space", "has--20space"),
        ("path/to/x", "path--2fto--2fx"),
        ("flemma__jobs__status:20", "flemma__jobs__status--3a20"),
        ("toolu_01.A-b", "toolu_01.A-b"),
        ("é", "--c3--a9"),
        // Kept as they are, these two would take the names of `a b` and `a/b`.
        ("a--b", "a--2d--2db"),
        ("a--20b", "a--2d--2d20b"),
    ];
    for (id, escaped) in cases {
        assert_eq!(escape_id(id), escaped, "{id}");
    }
    let store = store(
        &options_with_format("/s/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[],
    );
    for (id, escaped) in cases {
        assert_eq!(
            store.path_for(&tid(id), None).unwrap(),
            Path::new("/s").join(escaped),
            "{id}"
        );
    }
}

#[test]
fn name_is_wire_encoded() {
    assert_eq!(
        flemma_ids::encode_tool_name("flemma.jobs.status"),
        "flemma__jobs__status"
    );
    assert_eq!(
        flemma_ids::encode_tool_name("mcp:server.tool"),
        "mcp__server__tool"
    );
    let store = store(
        &options_with_format("/s/{{ name }}/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[],
    );
    assert_eq!(
        store
            .path_for(&tid("i"), Some(&tn("flemma.jobs.status")))
            .unwrap(),
        p("/s/flemma__jobs__status/i")
    );
    assert_eq!(
        store.path_for(&tid("i"), Some(&tn("a:b"))).unwrap(),
        p("/s/a__b/i")
    );
}

#[test]
fn namespace_collapse_examples() {
    let c = |s: &str| collapse_namespaces(Path::new(s));
    assert_eq!(c("/x/.flemma/flemma/y"), p("/x/.flemma/y"));
    assert_eq!(c("/opt/flemma/flemma/flemma/x"), p("/opt/flemma/x"));
    assert_eq!(c("myflemma/flemma"), p("myflemma/flemma"));
    assert_eq!(c("flemma/flemma-lab"), p("flemma/flemma-lab"));
    assert_eq!(c("/a/flemma/b/flemma"), p("/a/flemma/b/flemma"));

    // Through rendering, with the segments coming from a variable.
    let store = store(
        &options_with_format("$BASE/flemma/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[("BASE", "/x/.flemma/flemma")],
    );
    assert_eq!(store.path_for(&tid("i"), None).unwrap(), p("/x/.flemma/i"));
    // The default unnamed format under a TMPDIR ending in `flemma`.
    let store = crate::store(&options(), None, &[("TMPDIR", "/opt/flemma")]);
    assert_eq!(
        store.directory().unwrap(),
        PathBuf::from(format!("/opt/flemma/unnamed/{}/1", std::process::id()))
    );
}

#[test]
fn name_deduplication_example() {
    let store = store(
        &options_with_format("/s/{{ source }}_{{ name }}_{{ id }}.txt"),
        Some(Path::new("/n/x.chat")),
        &[],
    );
    let path = |name: &str, id: &str| store.path_for(&tid(id), Some(&tn(name))).unwrap();
    assert_eq!(path("bash", "bash:8"), p("/s/tool_bash--3a8.txt"));
    assert_eq!(
        path("flemma.jobs.status", "flemma__jobs__status:20"),
        p("/s/tool_flemma__jobs__status--3a20.txt")
    );
    // Not a whole-word repeat: untouched.
    assert_eq!(path("bash", "bashful"), p("/s/tool_bash_bashful.txt"));
    assert_eq!(path("bash", "xbash"), p("/s/tool_bash_xbash.txt"));
    // Without a name there is nothing to de-duplicate.
    assert_eq!(
        store.path_for(&tid("bash:8"), None).unwrap(),
        p("/s/tool__bash--3a8.txt")
    );
    // The same through the default preset.
    let store = crate::store(&options(), Some(Path::new("/n/x.chat")), &[]);
    assert_eq!(
        store.path_for(&tid("bash:8"), Some(&tn("bash"))).unwrap(),
        p("/n/.flemma/x.chat/tool_bash--3a8.txt")
    );
    assert_eq!(
        dedupe_name(Path::new("/s/a_bash_bash_bash_b"), "bash"),
        p("/s/a_bash_b")
    );
}

#[test]
fn inline_expansion_iterates_eight_passes() {
    // V1 → $V2 → … → V8 → `end`: eight passes resolve it.
    let mut pairs: Vec<(String, String)> = (1..8)
        .map(|i| (format!("V{i}"), format!("${{V{}}}", i + 1)))
        .collect();
    pairs.push(("V8".into(), "end".into()));
    pairs.push(("W1".into(), "$W2".into()));
    for i in 2..=9 {
        pairs.push((format!("W{i}"), format!("$W{}", i + 1)));
    }
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let lookup = env(&refs);
    assert_eq!(expand_inline("/a/$V1/b", &*lookup), "/a/end/b");
    // A chain needing more than eight passes stops after eight.
    assert_eq!(expand_inline("$W1", &*lookup), "$W9");
    // A self-reference terminates.
    let looping = env(&[("L", "$L")]);
    assert_eq!(expand_inline("x$L", &*looping), "x$L");

    let store = store(
        &options_with_format("/s/$V1/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &refs,
    );
    assert_eq!(store.path_for(&tid("i"), None).unwrap(), p("/s/end/i"));
}

#[test]
fn inline_expansion_forms() {
    let lookup = env(&[("HOME", "/home/u"), ("SET", "v"), ("EMPTY", "")]);
    assert_eq!(
        expand_inline("${SET:-d}/${UNSET:-d}/${EMPTY:-d}", &*lookup),
        "v/d/d"
    );
    assert_eq!(expand_inline("a/$UNSET/b/${UNSET}/c", &*lookup), "a//b//c");
    assert_eq!(
        expand_inline("${UNSET:-${SET:-x}}/$SET.txt", &*lookup),
        "v/v.txt"
    );
    // A value expanding to `~/…` is finally tilde-expanded.
    let store = store(
        &options_with_format("$DATA/{{ id }}"),
        Some(Path::new("/n/x.chat")),
        &[("DATA", "~/data"), ("HOME", "/home/u")],
    );
    assert_eq!(
        store.path_for(&tid("i"), None).unwrap(),
        p("/home/u/data/i")
    );
}

#[test]
fn store_directory() {
    let store = store(
        &options(),
        Some(Path::new("~/notes/example.chat")),
        &[("HOME", "/home/ada")],
    );
    assert_eq!(
        store.directory().unwrap(),
        p("/home/ada/notes/.flemma/example.chat")
    );

    let tmp = TempDir::new("store_directory");
    let chat = tmp.join("notes/example.chat");
    let store = Store::new(&options(), Some(&chat), "1").unwrap();
    let dir = tmp.join("notes/.flemma/example.chat");
    assert_eq!(store.directory().unwrap(), dir);
    assert!(!dir.exists());
    assert_eq!(store.ensure_directory().unwrap(), dir);
    assert!(dir.is_dir());
    // Idempotent.
    assert_eq!(store.ensure_directory().unwrap(), dir);
    let written = store
        .write_result(&tid("toolu_01"), Some(&tn("bash")), "out")
        .unwrap();
    assert_eq!(written.parent().unwrap(), dir);
}

#[test]
fn store_path_variable_in_save_to() {
    let tmp = TempDir::new("store_path_variable");
    let chat = tmp.join("notes/example.chat");
    let store = Store::new(&options(), Some(&chat), "1")
        .unwrap()
        // The environment's value loses to the inline variable.
        .with_env(env(&[("FLEMMA_TOOLS_STORE_PATH", "/elsewhere")]));
    let dir = tmp.join("notes/.flemma/example.chat");
    assert_eq!(
        store
            .save_to_destination("$FLEMMA_TOOLS_STORE_PATH/report.txt")
            .unwrap(),
        dir.join("report.txt")
    );
    assert_eq!(
        store
            .save_to_destination("${FLEMMA_TOOLS_STORE_PATH}/sub/r.txt")
            .unwrap(),
        dir.join("sub/r.txt")
    );
    match store.save_to("${FLEMMA_TOOLS_STORE_PATH}/report.txt", "full", None) {
        flemma_store::SaveOutcome::Saved { path, .. } => {
            assert_eq!(path, dir.join("report.txt"));
            assert_eq!(crate::read(&path), "full");
        }
        flemma_store::SaveOutcome::NotSaved { error, .. } => panic!("{error}"),
    }
}
