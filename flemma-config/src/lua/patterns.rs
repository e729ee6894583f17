//! `string.find`, `string.match`, `string.gmatch` and `string.gsub` with a bounded amount of
//! work.
//!
//! Lua's own pattern matcher runs in C: the instruction budget of a sandbox never fires
//! inside it, and a pattern such as `("a"):rep(40) .. "c"` matched against `string.rep("a*",
//! 40) .. "c"` backtracks for longer than the universe has left. These functions are Lua 5.4's
//! matcher (`lstrlib.c`: the same classes, captures, `%b`, `%f`, back references, anchors,
//! quantifiers and error texts) in Rust, counting its steps: past [`PATTERN_STEPS`] for one Lua
//! state the call fails with `pattern too complex`, as the C matcher does past its recursion
//! limit.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, Value};

/// The steps (attempts to match a pattern item) the pattern functions of one Lua state may
/// take in all: a few hundred milliseconds of matching.
pub(crate) const PATTERN_STEPS: u64 = 20_000_000;

const L_ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";
const MAX_CAPTURES: usize = 32;
/// Lua's `MAXCCALLS`: the deepest the matcher recurses.
const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CapLen {
    Unfinished,
    Position,
    Len(usize),
}

struct MatchState<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, CapLen); MAX_CAPTURES],
    depth: usize,
    steps: &'a Cell<u64>,
}

type Found = Result<Option<usize>, String>;

fn at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() { !res } else { res }
}

impl MatchState<'_> {
    fn step(&self) -> Result<(), String> {
        let left = self.steps.get();
        if left == 0 {
            return Err("pattern too complex".to_owned());
        }
        self.steps.set(left - 1);
        Ok(())
    }

    /// The end of the single-character class at `p`.
    fn class_end(&self, mut p: usize) -> Result<usize, String> {
        let c = at(self.pat, p);
        p += 1;
        if c == L_ESC {
            if p >= self.pat.len() {
                return Err("malformed pattern (ends with '%')".to_owned());
            }
            return Ok(p + 1);
        }
        if c == b'[' {
            if at(self.pat, p) == b'^' {
                p += 1;
            }
            loop {
                if p >= self.pat.len() {
                    return Err("malformed pattern (missing ']')".to_owned());
                }
                let cc = self.pat[p];
                p += 1;
                if cc == L_ESC && p < self.pat.len() {
                    p += 1;
                }
                if at(self.pat, p) == b']' {
                    break;
                }
            }
            return Ok(p + 1);
        }
        Ok(p)
    }

    /// Whether `c` is in the bracket class `[` at `p` … `]` at `ec`.
    fn bracket(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if at(self.pat, p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                break;
            }
            if self.pat[p] == L_ESC {
                p += 1;
                if match_class(c, at(self.pat, p)) {
                    return sig;
                }
            } else if at(self.pat, p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.pat[p - 2] <= c && c <= self.pat[p] {
                    return sig;
                }
            } else if self.pat[p] == c {
                return sig;
            }
        }
        !sig
    }

    fn single(&self, s: usize, p: usize, ep: usize) -> Result<bool, String> {
        self.step()?;
        if s >= self.src.len() {
            return Ok(false);
        }
        let c = self.src[s];
        Ok(match self.pat[p] {
            b'.' => true,
            L_ESC => match_class(c, at(self.pat, p + 1)),
            b'[' => self.bracket(c, p, ep - 1),
            other => other == c,
        })
    }

    fn balance(&self, s: usize, p: usize) -> Found {
        if p + 1 >= self.pat.len() {
            return Err("malformed pattern (missing arguments to '%b')".to_owned());
        }
        if s >= self.src.len() || self.src[s] != self.pat[p] {
            return Ok(None);
        }
        let (b, e) = (self.pat[p], self.pat[p + 1]);
        let mut cont = 1;
        let mut s = s + 1;
        while s < self.src.len() {
            self.step()?;
            if self.src[s] == e {
                cont -= 1;
                if cont == 0 {
                    return Ok(Some(s + 1));
                }
            } else if self.src[s] == b {
                cont += 1;
            }
            s += 1;
        }
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Found {
        let mut i = 0;
        while self.single(s + i, p, ep)? {
            i += 1;
        }
        loop {
            if let Some(res) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(res));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Found {
        loop {
            if let Some(res) = self.do_match(s, ep + 1)? {
                return Ok(Some(res));
            }
            if self.single(s, p, ep)? {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: CapLen) -> Found {
        if self.level >= MAX_CAPTURES {
            return Err("too many captures".to_owned());
        }
        self.capture[self.level] = (s, what);
        self.level += 1;
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.level -= 1;
        }
        Ok(res)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Found {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.capture[l].1 == CapLen::Unfinished)
        else {
            return Err("invalid pattern capture".to_owned());
        };
        self.capture[l].1 = CapLen::Len(s - self.capture[l].0);
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.capture[l].1 = CapLen::Unfinished;
        }
        Ok(res)
    }

    fn match_capture(&self, s: usize, l: u8) -> Found {
        let l = usize::from(l.wrapping_sub(b'1'));
        let len = match self.capture.get(l) {
            Some((_, CapLen::Len(len))) if l < self.level => *len,
            // A position capture's length is Lua's `CAP_POSITION` as a size: nothing matches.
            Some((_, CapLen::Position)) if l < self.level => return Ok(None),
            _ => return Err(format!("invalid capture index %{}", l + 1)),
        };
        let init = self.capture[l].0;
        if self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> Found {
        if self.depth == 0 {
            return Err("pattern too complex".to_owned());
        }
        self.depth -= 1;
        let res = self.match_at(s, p);
        self.depth += 1;
        res
    }

    fn match_at(&mut self, mut s: usize, mut p: usize) -> Found {
        loop {
            self.step()?;
            if p == self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' => {
                    return if at(self.pat, p + 1) == b')' {
                        self.start_capture(s, p + 2, CapLen::Position)
                    } else {
                        self.start_capture(s, p + 1, CapLen::Unfinished)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                L_ESC if at(self.pat, p + 1) == b'b' => match self.balance(s, p + 2)? {
                    Some(end) => {
                        s = end;
                        p += 4;
                    }
                    None => return Ok(None),
                },
                L_ESC if at(self.pat, p + 1) == b'f' => {
                    p += 2;
                    if at(self.pat, p) != b'[' {
                        return Err("missing '[' after '%f' in pattern".to_owned());
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    if !self.bracket(previous, p, ep - 1)
                        && self.bracket(at(self.src, s), p, ep - 1)
                    {
                        p = ep;
                        continue;
                    }
                    return Ok(None);
                }
                L_ESC if at(self.pat, p + 1).is_ascii_digit() => {
                    match self.match_capture(s, at(self.pat, p + 1))? {
                        Some(end) => {
                            s = end;
                            p += 2;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = at(self.pat, ep);
                    if !self.single(s, p, ep)? {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        b'?' => {
                            if let Some(res) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(res));
                            }
                            p = ep + 1;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    fn reset(&mut self) {
        self.level = 0;
        self.depth = MAX_DEPTH;
    }

    /// Capture `i` of a match `s..e` as a Lua value (the whole match for `i = 0` without
    /// captures).
    fn capture_value(&self, lua: &Lua, i: usize, s: usize, e: usize) -> mlua::Result<Value> {
        if i >= self.level {
            if i == 0 {
                return Ok(Value::String(lua.create_string(&self.src[s..e])?));
            }
            return Err(mlua::Error::runtime(format!(
                "invalid capture index %{}",
                i + 1
            )));
        }
        let (init, len) = self.capture[i];
        match len {
            CapLen::Unfinished => Err(mlua::Error::runtime("unfinished capture")),
            CapLen::Position => Ok(int(init + 1)),
            CapLen::Len(len) => Ok(Value::String(
                lua.create_string(&self.src[init..init + len])?,
            )),
        }
    }

    /// The captures of a match `s..e` (the whole match when the pattern has none and
    /// `whole`).
    fn captures(&self, lua: &Lua, s: usize, e: usize, whole: bool) -> mlua::Result<MultiValue> {
        let n = if self.level == 0 && whole {
            1
        } else {
            self.level
        };
        (0..n).map(|i| self.capture_value(lua, i, s, e)).collect()
    }
}

fn state<'a>(src: &'a [u8], pat: &'a [u8], steps: &'a Cell<u64>) -> MatchState<'a> {
    MatchState {
        src,
        pat,
        level: 0,
        capture: [(0, CapLen::Unfinished); MAX_CAPTURES],
        depth: MAX_DEPTH,
        steps,
    }
}

/// Lua's `posrelatI`: a 1-based position from `pos` (negative counts from the end).
fn position(pos: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos < -len_i {
        1
    } else {
        usize::try_from(len_i + pos + 1).unwrap_or(1)
    }
}

/// A position or a length as a Lua integer.
fn int(n: usize) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn runtime(message: String) -> mlua::Error {
    mlua::Error::runtime(message)
}

fn find_aux(
    lua: &Lua,
    steps: &Cell<u64>,
    (s, p, init, plain): (mlua::LuaString, mlua::LuaString, Option<i64>, Option<Value>),
    find: bool,
) -> mlua::Result<MultiValue> {
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let init = position(init.unwrap_or(1), src.len()) - 1;
    if init > src.len() {
        return Ok(MultiValue::from_iter([Value::Nil]));
    }
    let plain = plain.is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)));
    if find && (plain || !pat.iter().any(|c| SPECIALS.contains(c))) {
        // Two-way search: linear in the subject and the pattern, whatever they hold.
        let found = memchr::memmem::find(&src[init..], &pat);
        return Ok(match found {
            Some(at) => MultiValue::from_iter([int(init + at + 1), int(init + at + pat.len())]),
            None => MultiValue::from_iter([Value::Nil]),
        });
    }
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, &pat[..]),
    };
    let mut ms = state(&src, pat, steps);
    let mut s1 = init;
    loop {
        ms.reset();
        if let Some(e) = ms.do_match(s1, 0).map_err(runtime)? {
            if find {
                let mut out = vec![int(s1 + 1), int(e)];
                out.extend(ms.captures(lua, s1, e, false)?);
                return Ok(MultiValue::from_iter(out));
            }
            return ms.captures(lua, s1, e, true);
        }
        s1 += 1;
        if anchor || s1 > src.len() {
            return Ok(MultiValue::from_iter([Value::Nil]));
        }
    }
}

/// The replacement of one match `s..e` by `repl`; `None` keeps the match.
fn replacement(
    lua: &Lua,
    ms: &MatchState<'_>,
    start: usize,
    end: usize,
    repl: &Value,
) -> mlua::Result<Option<Vec<u8>>> {
    let value = match repl {
        Value::String(text) => {
            let text = text.as_bytes();
            let mut out = Vec::with_capacity(text.len());
            let mut pos = 0;
            while pos < text.len() {
                let byte = text[pos];
                pos += 1;
                if byte != L_ESC {
                    out.push(byte);
                    continue;
                }
                let digit = at(&text, pos);
                pos += 1;
                if digit == L_ESC {
                    out.push(L_ESC);
                } else if digit.is_ascii_digit() {
                    let value = if digit == b'0' {
                        Value::String(lua.create_string(&ms.src[start..end])?)
                    } else {
                        ms.capture_value(lua, usize::from(digit - b'1'), start, end)?
                    };
                    match value {
                        Value::String(text) => out.extend_from_slice(&text.as_bytes()),
                        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
                        _ => {}
                    }
                } else {
                    return Err(mlua::Error::runtime(
                        "invalid use of '%' in replacement string",
                    ));
                }
            }
            return Ok(Some(out));
        }
        Value::Integer(_) | Value::Number(_) => {
            let text = lua.coerce_string(repl.clone())?.map(Value::String);
            return replacement(lua, ms, start, end, &text.unwrap_or(Value::Nil));
        }
        Value::Table(table) => table.get::<Value>(ms.capture_value(lua, 0, start, end)?)?,
        Value::Function(f) => f.call::<Value>(ms.captures(lua, start, end, true)?)?,
        other => {
            return Err(mlua::Error::runtime(format!(
                "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                other.type_name()
            )));
        }
    };
    match value {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::String(text) => Ok(Some(text.as_bytes().to_vec())),
        Value::Integer(n) => Ok(Some(n.to_string().into_bytes())),
        Value::Number(n) => Ok(Some(
            lua.coerce_string(Value::Number(n))?
                .map_or_else(Vec::new, |s| s.as_bytes().to_vec()),
        )),
        other => Err(mlua::Error::runtime(format!(
            "invalid replacement value (a {})",
            other.type_name()
        ))),
    }
}

fn gsub(
    lua: &Lua,
    steps: &Cell<u64>,
    (s, p, repl, max): (mlua::LuaString, mlua::LuaString, Value, Option<i64>),
) -> mlua::Result<(Value, i64)> {
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let max = max.unwrap_or(i64::try_from(src.len()).unwrap_or(i64::MAX) + 1);
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, &pat[..]),
    };
    let mut ms = state(&src, pat, steps);
    let mut out: Vec<u8> = Vec::new();
    let (mut at_, mut n, mut changed) = (0usize, 0i64, false);
    let mut last: Option<usize> = None;
    while n < max {
        ms.reset();
        let e = ms.do_match(at_, 0).map_err(runtime)?;
        match e {
            Some(e) if Some(e) != last => {
                n += 1;
                match replacement(lua, &ms, at_, e, &repl)? {
                    Some(text) => {
                        out.extend_from_slice(&text);
                        changed = true;
                    }
                    None => out.extend_from_slice(&src[at_..e]),
                }
                at_ = e;
                last = Some(e);
            }
            _ if at_ < src.len() => {
                out.push(src[at_]);
                at_ += 1;
            }
            _ => break,
        }
        if anchor {
            break;
        }
    }
    if !changed {
        return Ok((Value::String(s.clone()), n));
    }
    out.extend_from_slice(&src[at_..]);
    Ok((Value::String(lua.create_string(&out)?), n))
}

fn gmatch(
    lua: &Lua,
    steps: Rc<Cell<u64>>,
    (s, p, init): (mlua::LuaString, mlua::LuaString, Option<i64>),
) -> mlua::Result<Function> {
    let len = s.as_bytes().len();
    let mut from = position(init.unwrap_or(1), len) - 1;
    if from > len {
        from = len + 1;
    }
    let next = Cell::new(from);
    let last: Cell<Option<usize>> = Cell::new(None);
    lua.create_function(move |lua, ()| {
        let (src, pat) = (s.as_bytes(), p.as_bytes());
        let mut ms = state(&src, &pat, &steps);
        let mut at_ = next.get();
        while at_ <= src.len() {
            ms.reset();
            if let Some(e) = ms.do_match(at_, 0).map_err(runtime)?
                && Some(e) != last.get()
            {
                next.set(e);
                last.set(Some(e));
                return ms.captures(lua, at_, e, true);
            }
            at_ += 1;
        }
        next.set(at_);
        Ok(MultiValue::new())
    })
}

/// Replaces `string.find`, `string.match`, `string.gmatch` and `string.gsub` of `lua` (and so
/// the methods of strings) with the bounded ones; the state's steps start at
/// `PATTERN_STEPS` (20 million).
///
/// # Errors
///
/// When the functions cannot be made or set.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let steps = Rc::new(Cell::new(PATTERN_STEPS));
    let string: Table = lua.globals().get("string")?;
    let budget = Rc::clone(&steps);
    string.set(
        "find",
        lua.create_function(move |lua, args| find_aux(lua, &budget, args, true))?,
    )?;
    let budget = Rc::clone(&steps);
    string.set(
        "match",
        lua.create_function(
            move |lua, (s, p, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
                find_aux(lua, &budget, (s, p, init, None), false)
            },
        )?,
    )?;
    let budget = Rc::clone(&steps);
    string.set(
        "gsub",
        lua.create_function(move |lua, args| gsub(lua, &budget, args))?,
    )?;
    let budget = Rc::clone(&steps);
    string.set(
        "gmatch",
        lua.create_function(move |lua, args| gmatch(lua, Rc::clone(&budget), args))?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a script gives in Lua's own string library and in the bounded one, as text.
    fn both(script: &str) -> (String, String) {
        let run = |bounded: bool| {
            let lua = Lua::new();
            if bounded {
                install(&lua).unwrap();
            }
            match lua.load(script).eval::<MultiValue>() {
                Ok(values) => values
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => format!("s:{:?}", s.to_string_lossy()),
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                Err(e) => {
                    let text = e.to_string();
                    // The message without the place Lua adds to a C function's error.
                    let first = text.lines().next().unwrap_or_default().to_owned();
                    format!("error: {}", first.rsplit(": ").next().unwrap_or_default())
                }
            }
        };
        (run(false), run(true))
    }

    fn lua_string(bytes: &str) -> String {
        format!("{bytes:?}").replace("\\u{", "\\u{")
    }

    #[test]
    fn the_matcher_agrees_with_luas_on_known_patterns() {
        let cases = [
            r#"return ("hello world"):find("o w")"#,
            r#"return ("hello world"):find("l+")"#,
            r#"return ("hello world"):find("o", 6)"#,
            r#"return ("hello world"):find("x")"#,
            r#"return ("a.b"):find(".", 1, true)"#,
            r#"return ("  trim me  "):match("^%s*(.-)%s*$")"#,
            r#"return ("key=value"):match("(%w+)=(%w+)")"#,
            r#"return ("abc"):match("()b()")"#,
            r#"return ("THE (quick) fox"):find("%((%a+)%)")"#,
            r#"return ("f(a(b)c)d"):match("%b()")"#,
            r#"return ("THE (quick) fox"):gsub("%f[%a]%a+", "X")"#,
            r#"return ("hello"):gsub("l", {l = "L"})"#,
            r#"return ("hello"):gsub("(l)(l)", "%2%1%0")"#,
            r#"return ("abc"):gsub("%w", function(c) return c:upper() .. "." end)"#,
            r#"return ("abc"):gsub("", "-")"#,
            r#"return ("abc"):gsub("b*", "-")"#,
            r#"return ("hello world from lua"):gsub("%w+", "<%0>", 2)"#,
            r#"local t = {} for k, v in ("a=1, b=2"):gmatch("(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t, ";")"#,
            r#"local t = {} for w in ("one two  three"):gmatch("%a+") do t[#t+1] = w end return table.concat(t, ",")"#,
            r#"local t = {} for w in ("abc"):gmatch("") do t[#t+1] = "x" end return #t"#,
            r#"return ("aaa"):match("(a)%1")"#,
            r#"return ("x"):match("[%a-]")"#,
            r#"return ("-"):match("[a-]")"#,
            r#"return ("]"):match("[]]")"#,
            r#"return ("^x"):match("^^x")"#,
            r#"return ("a$"):match("a$b")"#,
            r#"return ("abc"):find("b", -2)"#,
            r#"return ("abc"):find("", 10)"#,
            r#"return ("abc"):match("%")"#,
            r#"return ("abc"):match("[a")"#,
            r#"return ("abc"):match("(a")"#,
            r#"return ("abc"):match("a)")"#,
            r#"return ("abc"):match("%1")"#,
            r#"return ("abc"):gsub("a", "%2")"#,
            r#"return ("abc"):gsub("a", "%x")"#,
            r#"return ("abc"):match("%f")"#,
            r#"return ("abc"):match("%b")"#,
        ];
        for script in cases {
            let (lua, ours) = both(script);
            assert_eq!(ours, lua, "{script}");
        }
    }

    #[test]
    fn a_pathological_pattern_is_too_complex_not_a_hang() {
        let lua = Lua::new();
        install(&lua).unwrap();
        let started = std::time::Instant::now();
        let error = lua
            .load(r#"return string.rep("a", 40):find(string.rep("a*", 40) .. "c")"#)
            .eval::<MultiValue>()
            .unwrap_err();
        assert!(error.to_string().contains("pattern too complex"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    /// Patterns and subjects made of what patterns are made of.
    fn pattern() -> impl Strategy<Value = String> {
        let piece = proptest::sample::select(
            &[
                "a", "b", ".", "%a", "%d", "%s", "%w", "[ab]", "[^a]", "[a-c]", "*", "+", "-", "?",
                "(", ")", "()", "%1", "^", "$", "%b()", "%f[%a]", "%%", "%(",
            ][..],
        );
        proptest::collection::vec(piece, 0..7).prop_map(|p| p.concat())
    }

    fn subject() -> impl Strategy<Value = String> {
        "[ab1 ()c]{0,10}"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        /// The bounded matcher gives what Lua's gives: `find`, `match`, `gsub` and `gmatch`,
        /// errors included.
        #[test]
        fn the_matcher_agrees_with_luas(s in subject(), p in pattern(), init in -4i64..12) {
            let (s, p) = (lua_string(&s), lua_string(&p));
            for script in [
                format!("return ({s}):find({p}, {init})"),
                format!("return ({s}):match({p}, {init})"),
                format!("return ({s}):gsub({p}, \"<%0>\")"),
                format!("local t = {{}} for a, b in ({s}):gmatch({p}) do t[#t+1] = tostring(a) .. '|' .. tostring(b) end return table.concat(t, ',')"),
            ] {
                let (lua, ours) = both(&script);
                prop_assert_eq!(ours, lua, "{}", script);
            }
        }
    }
}
