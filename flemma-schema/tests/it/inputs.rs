//! The built-in tools' input types read a call as the tools do (`from_call`): what they
//! serialize to reads back as itself, fields they do not know are ignored, and a call that
//! does not give a needed field names the first such field in the order the tools check.

use flemma_schema::builtin::inputs::{
    BashInput, EditInput, FindInput, GrepInput, JobStatusInput, LsInput, ReadInput, WriteInput,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The field `from_call` names, or `None` when the call reads.
fn missing<T>(
    read: Result<T, flemma_schema::builtin::inputs::MissingInput>,
) -> Option<&'static str> {
    read.err().map(|m| m.field)
}

#[test]
fn a_missing_field_is_named_in_the_order_the_tools_check() {
    assert_eq!(missing(EditInput::from_call(&json!({}))), Some("path"));
    assert_eq!(
        missing(EditInput::from_call(&json!({"path": ""}))),
        Some("path")
    );
    assert_eq!(
        missing(EditInput::from_call(&json!({"path": 3}))),
        Some("path")
    );
    assert_eq!(
        missing(EditInput::from_call(&json!({"path": "a"}))),
        Some("oldText")
    );
    let empty_old = json!({"path": "a", "oldText": "", "newText": "b"});
    assert_eq!(missing(EditInput::from_call(&empty_old)), Some("oldText"));
    let null_new = json!({"path": "a", "oldText": "x", "newText": null});
    assert_eq!(missing(EditInput::from_call(&null_new)), Some("newText"));
    // An empty newText deletes the old text; an empty content writes an empty file.
    let empty_new = json!({"path": "a", "oldText": "x", "newText": ""});
    assert_eq!(missing(EditInput::from_call(&empty_new)), None);
    assert_eq!(
        missing(WriteInput::from_call(&json!({"path": "a"}))),
        Some("content")
    );
    assert_eq!(
        missing(WriteInput::from_call(&json!({"path": "a", "content": ""}))),
        None
    );
    assert_eq!(
        missing(BashInput::from_call(&json!({"command": ""}))),
        Some("command")
    );
    assert_eq!(
        missing(GrepInput::from_call(&json!({"pattern": null}))),
        Some("pattern")
    );
    assert_eq!(
        missing(FindInput::from_call(&json!({"path": "."}))),
        Some("pattern")
    );
    assert_eq!(
        missing(LsInput::from_call(&json!({"max_depth": 2}))),
        Some("path")
    );
    assert_eq!(missing(ReadInput::from_call(&json!("a.txt"))), Some("path"));
    assert_eq!(
        missing(JobStatusInput::from_call(&json!({}))),
        Some("job_id")
    );
    assert_eq!(
        missing(JobStatusInput::from_call(&json!({"job_id": ""}))),
        None
    );
}

#[test]
fn the_label_and_the_numbers_are_read_leniently() {
    // No label: the call still runs (only previews show it).
    let read = ReadInput::from_call(&json!({"path": "a", "offset": "3", "limit": 2.5})).unwrap();
    assert_eq!(read.label, "");
    // A number written as a string is not one.
    assert_eq!((read.offset, read.limit), (None, Some(2.5)));
    let grep = GrepInput::from_call(&json!({"pattern": "x", "path": 1, "glob": "*.rs"})).unwrap();
    assert_eq!((grep.path, grep.glob.as_deref()), (None, Some("*.rs")));
    let bash = BashInput::from_call(&json!({"label": 7, "command": "ls", "timeout": null}));
    assert_eq!(
        bash.unwrap(),
        BashInput {
            label: String::new(),
            command: "ls".into(),
            timeout: None,
        }
    );
}

fn text() -> impl Strategy<Value = String> {
    any::<String>()
}

fn required() -> impl Strategy<Value = String> {
    any::<String>().prop_filter("not empty", |s| !s.is_empty())
}

fn number() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of(-1e12_f64..1e12)
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9_f64..1e9).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("path".to_owned()),
                    Just("command".to_owned()),
                    Just("oldText".to_owned()),
                    Just("newText".to_owned()),
                    Just("content".to_owned()),
                    Just("pattern".to_owned()),
                    Just("limit".to_owned()),
                    Just("job_id".to_owned()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Reads back `value` through `T::from_call`, also with an unknown field added.
fn reads_back<T>(
    value: &T,
    from_call: fn(&Value) -> Result<T, flemma_schema::builtin::inputs::MissingInput>,
) where
    T: serde::Serialize + PartialEq + std::fmt::Debug,
{
    let mut input = serde_json::to_value(value).unwrap();
    assert_eq!(from_call(&input).as_ref(), Ok(value));
    input["an_unknown_field"] = json!({"path": 1});
    assert_eq!(from_call(&input).as_ref(), Ok(value));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn what_an_input_serializes_to_reads_back_as_itself(
        label in text(),
        path in required(),
        second in required(),
        free in text(),
        a in number(),
        b in number(),
        optional_text in proptest::option::of(text()),
    ) {
        reads_back(&BashInput { label: label.clone(), command: path.clone(), timeout: a }, BashInput::from_call);
        reads_back(&ReadInput { label: label.clone(), path: path.clone(), offset: a, limit: b }, ReadInput::from_call);
        reads_back(&WriteInput { label: label.clone(), path: path.clone(), content: free.clone() }, WriteInput::from_call);
        reads_back(
            &EditInput { label: label.clone(), path: path.clone(), old_text: second.clone(), new_text: free.clone() },
            EditInput::from_call,
        );
        reads_back(
            &GrepInput { label: label.clone(), pattern: second.clone(), path: optional_text.clone(), glob: optional_text.clone(), limit: a },
            GrepInput::from_call,
        );
        reads_back(
            &FindInput { label: label.clone(), pattern: second.clone(), path: optional_text, limit: b },
            FindInput::from_call,
        );
        reads_back(&LsInput { label, path, max_depth: a, limit: b }, LsInput::from_call);
        reads_back(&JobStatusInput { job_id: free }, JobStatusInput::from_call);
    }

    /// Whatever a model writes, reading it answers (it never panics), and a field it names
    /// as missing was not given as text.
    #[test]
    fn any_json_reads_or_names_a_field(input in json_value()) {
        let fields = [
            missing(BashInput::from_call(&input)),
            missing(ReadInput::from_call(&input)),
            missing(WriteInput::from_call(&input)),
            missing(EditInput::from_call(&input)),
            missing(GrepInput::from_call(&input)),
            missing(FindInput::from_call(&input)),
            missing(LsInput::from_call(&input)),
            missing(JobStatusInput::from_call(&input)),
        ];
        for field in fields.into_iter().flatten() {
            let given = input.get(field);
            prop_assert!(
                given.is_none_or(|v| v.as_str().is_none_or(str::is_empty)),
                "{field} was given as {given:?}"
            );
        }
    }
}
