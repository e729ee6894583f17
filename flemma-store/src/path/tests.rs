use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/u".into()),
        "A" => Some("$B".into()),
        "B" => Some("bee".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

#[test]
fn inline_expansion() {
    assert_eq!(
        expand_inline("${XDG_STATE_HOME:-$HOME/.flemma}/x", &env),
        "/home/u/.flemma/x"
    );
    assert_eq!(expand_inline("$A/$UNSET/${B}", &env), "bee//bee");
    assert_eq!(expand_inline("${EMPTY:-dflt} $ 5$", &env), "dflt $ 5$");
    assert_eq!(expand_inline("${TMPDIR:-/tmp}", &env), "/tmp");
}

#[test]
fn namespace_collapse() {
    let c = |p: &str| {
        collapse_namespaces(Path::new(p))
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(c("/x/.flemma/flemma/y"), "/x/.flemma/y");
    assert_eq!(c("/opt/flemma/flemma/flemma/x"), "/opt/flemma/x");
    assert_eq!(c("myflemma/flemma"), "myflemma/flemma");
    assert_eq!(c("flemma/flemma-lab"), "flemma/flemma-lab");
}

#[test]
fn name_dedupe() {
    let d = |p: &str, n: &str| dedupe_name(Path::new(p), n).to_string_lossy().into_owned();
    assert_eq!(d("/s/tool_bash_bash--8.txt", "bash"), "/s/tool_bash--8.txt");
    assert_eq!(
        d("/s/tool_bash_bashful.txt", "bash"),
        "/s/tool_bash_bashful.txt"
    );
    assert_eq!(
        d("/s/tool_xbash_bash.txt", "bash"),
        "/s/tool_xbash_bash.txt"
    );
    assert_eq!(d("/s/a_bash_bash_bash_b", "bash"), "/s/a_bash_b");
    assert_eq!(
        d(
            "/s/tool_flemma__jobs__status_flemma__jobs__status--20.txt",
            "flemma__jobs__status"
        ),
        "/s/tool_flemma__jobs__status--20.txt"
    );
}

#[test]
fn normalization() {
    let n = |p: &str| normalize(p).to_string_lossy().into_owned();
    assert_eq!(n("/a/./b/../c"), "/a/c");
    assert_eq!(n("../../x"), "../../x");
    assert_eq!(n("a/../../b"), "../b");
    assert_eq!(n("/../etc"), "/etc");
    assert_eq!(n("./a/.."), "");
}

#[test]
fn escaping() {
    assert_eq!(escape_id("has space"), "has--20space");
    assert_eq!(escape_id("path/to/x"), "path--2fto--2fx");
    assert_eq!(
        escape_id("flemma__jobs__status:20"),
        "flemma__jobs__status--3a20"
    );
    assert_eq!(escape_id(".."), "--2e.");
    assert_eq!(escape_id("."), "--2e");
    assert_eq!(escape_id(".x"), ".x");
    assert_eq!(escape_id(".x y"), "--2ex--20y");
    assert_eq!(
        flatten("/home/user/notes/example.chat"),
        "home--user--notes--example.chat"
    );
}
