//! List operations: `+x` append, `^x` prepend, `!x` remove, `$preset` spread.

use serde_json::Value;

use crate::error::ConfigError;

/// One operation on a list option, as written (values may still be `$preset` references).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListOp {
    /// Replace the list.
    Set(Vec<String>),
    /// Move the item to the end (removing an equal item first).
    Append(String),
    /// Move the item to the front (removing an equal item first).
    Prepend(String),
    /// Remove the first equal item.
    Remove(String),
}

/// Which operation, without its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`ListOp::Set`]
    Set,
    /// [`ListOp::Append`]
    Append,
    /// [`ListOp::Prepend`]
    Prepend,
    /// [`ListOp::Remove`]
    Remove,
}

impl ListOp {
    /// The operation's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            ListOp::Set(_) => OpKind::Set,
            ListOp::Append(_) => OpKind::Append,
            ListOp::Prepend(_) => OpKind::Prepend,
            ListOp::Remove(_) => OpKind::Remove,
        }
    }
}

/// Whether a string is a `$preset` reference: `$` and a lowercase ASCII letter.
pub fn is_preset_ref(item: &str) -> bool {
    let mut chars = item.chars();
    chars.next() == Some('$') && chars.next().is_some_and(|c| c.is_ascii_lowercase())
}

/// A written list item: its operator and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item<'a> {
    Bare(&'a str),
    Append(&'a str),
    Prepend(&'a str),
    Remove(&'a str),
}

fn parse_item<'a>(path: &str, item: &'a str) -> Result<Item<'a>, ConfigError> {
    let invalid = |reason| ConfigError::InvalidListItem {
        path: path.to_owned(),
        item: item.to_owned(),
        reason,
    };
    if item.chars().count() < 2 {
        return Ok(Item::Bare(item));
    }
    let (op, rest) = match item.as_bytes()[0] {
        b'+' => (Item::Append as fn(&'a str) -> Item<'a>, &item[1..]),
        b'^' => (Item::Prepend as fn(&'a str) -> Item<'a>, &item[1..]),
        b'!' => (Item::Remove as fn(&'a str) -> Item<'a>, &item[1..]),
        _ => return Ok(Item::Bare(item)),
    };
    if rest.starts_with(['+', '^', '!']) {
        return Err(invalid("list operators do not compose"));
    }
    if is_preset_ref(rest) {
        return Err(invalid("a $preset reference cannot take an operator"));
    }
    Ok(op(rest))
}

/// Turns a written list (items may carry `+ ^ !` and `$preset`) into operations.
///
/// `expand` resolves a `$preset` reference into the preset's items for this path (which may
/// themselves carry operators); `None` keeps the reference verbatim as a bare value. A `Set` of
/// the bare values comes first when there is at least one bare value or no operation at all
/// (so an empty list means "set to empty"), then the operations in declaration order.
///
/// # Errors
///
/// [`ConfigError::InvalidListItem`] for items whose operators do not compose.
///
/// ```
/// use flemma_config::{ListOp, parse_list};
///
/// let standard = vec!["read".to_owned(), "write".to_owned(), "edit".to_owned()];
/// let ops = parse_list("tools.auto_approve", &["bash", "$standard", "!edit"], &|name| {
///     (name == "$standard").then(|| standard.clone())
/// })?;
/// assert_eq!(ops, [
///     ListOp::Set(vec!["bash".into(), "read".into(), "write".into(), "edit".into()]),
///     ListOp::Remove("edit".into()),
/// ]);
/// # Ok::<(), flemma_config::ConfigError>(())
/// ```
pub fn parse_list<S: AsRef<str>>(
    path: &str,
    items: &[S],
    expand: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<Vec<ListOp>, ConfigError> {
    let mut bare = Vec::new();
    let mut ops = Vec::new();
    collect(path, items, expand, &mut bare, &mut ops, 0)?;
    let mut out = Vec::with_capacity(ops.len() + 1);
    if !bare.is_empty() || ops.is_empty() {
        out.push(ListOp::Set(bare));
    }
    out.extend(ops);
    Ok(out)
}

fn collect<S: AsRef<str>>(
    path: &str,
    items: &[S],
    expand: &dyn Fn(&str) -> Option<Vec<String>>,
    bare: &mut Vec<String>,
    ops: &mut Vec<ListOp>,
    depth: u32,
) -> Result<(), ConfigError> {
    for item in items {
        let item = item.as_ref();
        match parse_item(path, item)? {
            Item::Bare(value) if is_preset_ref(value) && depth < 8 => match expand(value) {
                Some(expanded) => collect(path, &expanded, expand, bare, ops, depth + 1)?,
                None => bare.push(value.to_owned()),
            },
            Item::Bare(value) => bare.push(value.to_owned()),
            Item::Append(value) => ops.push(ListOp::Append(value.to_owned())),
            Item::Prepend(value) => ops.push(ListOp::Prepend(value.to_owned())),
            Item::Remove(value) => ops.push(ListOp::Remove(value.to_owned())),
        }
    }
    Ok(())
}

/// Expands `$preset` values inside single-item operations: each resolved item becomes its own
/// operation of the same kind (bare items of the preset, references among them expanded in
/// turn; the preset's own operators are dropped).
pub(crate) fn expand_op(op: &ListOp, expand: &dyn Fn(&str) -> Option<Vec<String>>) -> Vec<ListOp> {
    let (make, value): (fn(String) -> ListOp, &String) = match op {
        ListOp::Set(_) => return vec![op.clone()],
        ListOp::Append(v) => (ListOp::Append, v),
        ListOp::Prepend(v) => (ListOp::Prepend, v),
        ListOp::Remove(v) => (ListOp::Remove, v),
    };
    if !is_preset_ref(value) {
        return vec![op.clone()];
    }
    match expand(value) {
        Some(items) => {
            // Prepending the items one by one reverses them; that is the spec's behaviour
            // (`^$standard` onto `{bash}` gives `{edit, write, read, bash}`).
            let mut values = Vec::new();
            spread(&items, expand, &mut values, 0);
            values.into_iter().map(make).collect()
        }
        None => vec![op.clone()],
    }
}

/// The bare values of a preset's items, nested references expanded (bounded like
/// [`parse_list`]; an unknown or too deep reference stays verbatim).
fn spread(
    items: &[String],
    expand: &dyn Fn(&str) -> Option<Vec<String>>,
    out: &mut Vec<String>,
    depth: u32,
) {
    for item in items {
        if item.starts_with(['+', '^', '!']) && item.chars().count() >= 2 {
            continue;
        }
        match (is_preset_ref(item) && depth < 8)
            .then(|| expand(item))
            .flatten()
        {
            Some(nested) => spread(&nested, expand, out, depth + 1),
            None => out.push(item.clone()),
        }
    }
}

/// Strings of a JSON list value.
pub(crate) fn strings(path: &str, value: &Value) -> Result<Vec<String>, ConfigError> {
    let type_error = || ConfigError::Type {
        path: path.to_owned(),
        expected: "a list of strings",
        found: value.to_string(),
    };
    match value {
        // A bare string is a one-element list (spec §18.14).
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(type_error))
            .collect(),
        _ => Err(type_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<Vec<String>> {
        None
    }

    #[test]
    fn operators_do_not_compose() {
        for bad in ["+^x", "!$std", "!+x", "^$ro", "++x"] {
            let err = parse_list("tools", &[bad], &none).unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidListItem { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn short_and_odd_items_are_bare() {
        let ops = parse_list("tools", &["+", "$", "$Upper", "x"], &none).unwrap();
        assert_eq!(
            ops,
            [ListOp::Set(vec![
                "+".into(),
                "$".into(),
                "$Upper".into(),
                "x".into()
            ])]
        );
        assert_eq!(
            parse_list::<&str>("tools", &[], &none).unwrap(),
            [ListOp::Set(vec![])]
        );
        assert_eq!(
            parse_list("tools", &["!bash"], &none).unwrap(),
            [ListOp::Remove("bash".into())]
        );
    }

    #[test]
    fn unknown_presets_stay_verbatim() {
        let ops = parse_list("tools", &["$nope", "+a"], &none).unwrap();
        assert_eq!(
            ops,
            [
                ListOp::Set(vec!["$nope".into()]),
                ListOp::Append("a".into())
            ]
        );
    }
}
