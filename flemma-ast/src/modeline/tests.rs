use super::*;

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

#[test]
fn splits_and_coerces() {
    let line = parse("pending  a=1 b=2.5 c=true d=nil e= f=0x10 'x y' \"q\\\"z\"");
    let entries: Vec<_> = line
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(
        entries,
        vec![
            ("1".into(), s("pending")),
            ("a".into(), Value::Integer(1)),
            ("b".into(), Value::Float(2.5)),
            ("c".into(), Value::Bool(true)),
            ("f".into(), Value::Integer(16)),
            ("2".into(), s("x y")),
            ("3".into(), s("q\"z")),
        ]
    );
}

#[test]
fn nil_positional_leaves_a_gap() {
    let line = parse("a nil pending");
    assert_eq!(line.positionals().collect::<Vec<_>>(), vec![&s("a")]);
    assert_eq!(line.get(&Key::Positional(3)), Some(&s("pending")));
}

#[test]
fn unterminated_quote_runs_to_end() {
    let line = parse("'abc def");
    assert_eq!(line.get(&Key::Positional(1)), Some(&s("'abc def")));
}

#[test]
fn lists_split_outside_quotes() {
    let line = parse(r#"x="a,b",c,,3"#);
    assert_eq!(
        line.named("x"),
        Some(&Value::List(vec![
            s("a,b"),
            s("c"),
            Value::Null,
            Value::Integer(3)
        ]))
    );
}

#[test]
fn quote_in_the_middle_is_not_fully_quoted() {
    assert_eq!(resolve("'a'b'"), s("'a'b'"));
    assert_eq!(resolve("'a\\'b'"), s("a'b"));
    assert_eq!(resolve("'a\\\\'"), s("a\\"));
    assert_eq!(resolve("'a\\nb'"), s("a\\nb"));
}

#[test]
fn numbers_follow_tonumber() {
    assert_eq!(resolve("5."), Value::Float(5.0));
    assert_eq!(resolve(".5"), Value::Float(0.5));
    assert_eq!(resolve("-3"), Value::Integer(-3));
    assert_eq!(resolve("1e3"), Value::Float(1000.0));
    assert_eq!(resolve("1e"), s("1e"));
    assert_eq!(resolve("."), s("."));
    assert_eq!(resolve("inf"), s("inf"));
    assert_eq!(resolve("99999999999999999999"), Value::Float(1e20));
}

#[test]
fn written_tokens_read_back() {
    let cases = [
        s("plain"),
        s(""),
        s("two words"),
        s("true"),
        s("12"),
        s("a,b"),
        s("k=v"),
        s("q\"uo'te\\"),
        Value::Bool(false),
        Value::Integer(-7),
        Value::Float(1e20),
        Value::Float(0.5),
        Value::List(vec![s("a"), Value::Null, Value::Integer(2)]),
        Value::List(vec![s("only")]),
        Value::List(vec![]),
    ];
    for value in cases {
        let mut line = Modeline::new();
        line.insert(Key::Positional(1), value.clone());
        line.insert(Key::Named("k".into()), value.clone());
        let text = line.to_modeline_string();
        assert_eq!(parse(&text), line, "{text}");
    }
}
