//! Borrowed reading of a source line's fields and direct writing of Pi JSON.
//!
//! The message lines are read into small structs whose fields are `&RawValue` slices of the
//! line (nothing allocated for a field the mapping does not read, nor for a text it copies),
//! and the Pi entry is written as bytes: a string copied unchanged goes out as its source
//! token (an equal JSON value: the escapes are JSON's), so it is neither decoded nor escaped
//! again. A field absent from the line is `None`; a field present with any value (`null`
//! included) is `Some(raw)`, as `serde_json::Value::get` would see it.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// A field's raw JSON when the key is present, whatever its value (`null` included).
pub(crate) fn present<'de, 'a, D>(d: D) -> Result<Option<&'a RawValue>, D::Error>
where
    'de: 'a,
    D: serde::Deserializer<'de>,
{
    <&'a RawValue>::deserialize(d).map(Some)
}

/// Declares a struct of borrowed raw fields: `name => "jsonKey"`, each `Option<&RawValue>`
/// (`Some` when the key is present). Unknown keys are skipped unallocated; a key given twice is
/// an error (the caller records the line as unreadable).
macro_rules! raw_struct {
    ($(#[$m:meta])* $name:ident { $($f:ident => $k:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(serde::Deserialize, Default)]
        pub(crate) struct $name<'a> {
            $(
                #[serde(rename = $k, borrow, default, deserialize_with = "crate::convert::raw::present")]
                pub $f: Option<&'a serde_json::value::RawValue>,
            )*
        }
    };
}
pub(crate) use raw_struct;

/// A field read as `T` when it is a JSON object, in the same pass over the line as the fields
/// around it (no second scan of its text); `Other` for any other value. A number `serde_json`
/// cannot hold (`1e400`) fails the whole parse, where a `&RawValue` would not: callers read
/// such a line again the two-step way (the raw field, then `T` from it).
pub(crate) enum Nested<T> {
    Object(T),
    Other,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Nested<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Nested<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Nested<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(a)).map(Nested::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Nested<T>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Nested::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_unit<E>(self) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
            fn visit_none<E>(self) -> Result<Nested<T>, E> {
                Ok(Nested::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A `Nested` field when the key is present, whatever its value (`null` included: `Other`).
pub(crate) fn present_nested<'de, D, T>(d: D) -> Result<Option<Nested<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Nested::deserialize(d).map(Some)
}

/// The raw text of a field that is a JSON string (its token, quotes included).
pub(crate) fn str_tok(r: Option<&RawValue>) -> Option<&str> {
    r.map(RawValue::get).filter(|t| t.starts_with('"'))
}

/// A JSON string field decoded (borrowed when it has no escape), or None when absent or not
/// a string.
pub(crate) fn str_of(r: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let t = str_tok(r)?;
    let inner = &t[1..t.len() - 1];
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(t).ok().map(Cow::Owned)
}

/// The first byte of a field's JSON (`{`, `[`, `"`, a digit, `t`, `f`, `n`), 0 when absent.
pub(crate) fn kind(r: Option<&RawValue>) -> u8 {
    r.and_then(|r| r.get().bytes().next()).unwrap_or(0)
}

/// A field that is `true`.
pub(crate) fn is_true(r: Option<&RawValue>) -> bool {
    r.is_some_and(|r| r.get() == "true")
}

/// A count as `Value::as_u64`, else `as_f64` truncated (a negative or non-number: 0).
pub(crate) fn count(r: Option<&RawValue>) -> u64 {
    let Some(t) = r.map(RawValue::get) else {
        return 0;
    };
    if let Ok(v) = t.parse::<u64>() {
        return v;
    }
    match t.bytes().next() {
        Some(b'-' | b'0'..=b'9') => t.parse::<f64>().map_or(0, |f| f as u64),
        _ => 0,
    }
}

/// The elements of a JSON array field (empty when absent or not an array).
pub(crate) fn elements(r: Option<&RawValue>) -> Result<Vec<&RawValue>, serde_json::Error> {
    match r {
        Some(r) if r.get().starts_with('[') => serde_json::from_str(r.get()),
        _ => Ok(Vec::new()),
    }
}

/// `T` read from a field that is a JSON object (`T::default()` when absent or not an object,
/// as every `Value::get` on it would give None).
pub(crate) fn object<'a, T: Deserialize<'a> + Default>(
    r: Option<&'a RawValue>,
) -> Result<T, serde_json::Error> {
    match r {
        Some(r) if r.get().starts_with('{') => serde_json::from_str(r.get()),
        _ => Ok(T::default()),
    }
}

/// May the line hold an escaped surrogate (`\uD800`-`\uDFFF`)? A lone one is not a string
/// `serde_json::Value` accepts; such a line is checked by a full parse.
pub(crate) fn may_have_surrogate(line: &[u8]) -> bool {
    memchr::memmem::find_iter(line, b"\\u").any(|i| matches!(line.get(i + 2), Some(b'd' | b'D')))
}

/// A JSON writer of Pi entries into a byte buffer.
pub(crate) struct W<'b>(pub &'b mut Vec<u8>);

impl W<'_> {
    pub fn lit(&mut self, s: &str) -> &mut Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// A string, escaped.
    pub fn str(&mut self, s: &str) -> &mut Self {
        super::push_str(self.0, s);
        self
    }
    /// A string field copied as its source token, or `""` when it is absent or not a string.
    pub fn tok_or_empty(&mut self, r: Option<&RawValue>) -> &mut Self {
        match str_tok(r) {
            Some(t) => self.0.extend_from_slice(t.as_bytes()),
            None => self.0.extend_from_slice(b"\"\""),
        }
        self
    }
    /// Any JSON value, copied as it is.
    pub fn raw(&mut self, r: &RawValue) -> &mut Self {
        self.0.extend_from_slice(r.get().as_bytes());
        self
    }
    pub fn num(&mut self, n: u64) -> &mut Self {
        let mut b = itoa_buf(n);
        self.0.extend_from_slice(b.as_bytes_mut());
        self
    }
    pub fn int(&mut self, n: i64) -> &mut Self {
        if n < 0 {
            self.0.push(b'-');
        }
        self.num(n.unsigned_abs())
    }
}

struct Digits([u8; 20], usize);

impl Digits {
    fn as_bytes_mut(&mut self) -> &[u8] {
        &self.0[self.1..]
    }
}

fn itoa_buf(mut n: u64) -> Digits {
    let mut b = [0u8; 20];
    let mut i = 20;
    loop {
        i -= 1;
        b[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    Digits(b, i)
}

/// Pi's zero cost object.
pub(crate) const ZERO_COST: &str =
    "{\"cacheRead\":0,\"cacheWrite\":0,\"input\":0,\"output\":0,\"total\":0}";

/// Pi usage: `{"cacheRead","cacheWrite","cost","input","output"[,"reasoning"],"totalTokens"}`.
pub(crate) fn usage(
    w: &mut W<'_>,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total: u64,
    reasoning: Option<u64>,
) {
    w.lit("{\"cacheRead\":")
        .num(cache_read)
        .lit(",\"cacheWrite\":")
        .num(cache_write)
        .lit(",\"cost\":")
        .lit(ZERO_COST)
        .lit(",\"input\":")
        .num(input)
        .lit(",\"output\":")
        .num(output);
    if let Some(r) = reasoning {
        w.lit(",\"reasoning\":").num(r);
    }
    w.lit(",\"totalTokens\":").num(total).lit("}");
}

#[cfg(test)]
mod tests {
    use super::*;

    raw_struct!(T { a => "a", b => "b" });

    #[test]
    fn present_keeps_null_and_absent_apart() {
        let t: T = serde_json::from_str(r#"{"a":null,"x":[1,{"y":2}]}"#).unwrap();
        assert_eq!(t.a.map(RawValue::get), Some("null"));
        assert!(t.b.is_none());
    }

    #[test]
    fn strings_decode_and_copy() {
        let t: T = serde_json::from_str(r#"{"a":"x\u00e9\n","b":5}"#).unwrap();
        assert_eq!(str_of(t.a).as_deref(), Some("xé\n"));
        assert_eq!(str_tok(t.a), Some(r#""x\u00e9\n""#));
        assert_eq!(str_of(t.b), None);
        let mut o = Vec::new();
        W(&mut o).tok_or_empty(t.a).lit(",").tok_or_empty(t.b);
        assert_eq!(o, br#""x\u00e9\n","""#);
    }

    #[test]
    fn counts_read_as_value_does() {
        let c = |s: &str| count(Some(&*serde_json::from_str::<Box<RawValue>>(s).unwrap()));
        assert_eq!(c("12"), 12);
        assert_eq!(c("1.9"), 1);
        assert_eq!(c("-3"), 0);
        assert_eq!(c("\"7\""), 0);
        assert_eq!(c("1e3"), 1000);
        assert_eq!(count(None), 0);
        let mut o = Vec::new();
        W(&mut o).num(0).lit(" ").num(u64::MAX).lit(" ").int(-42);
        assert_eq!(o, b"0 18446744073709551615 -42");
    }

    raw_struct!(In { x => "x" });
    #[derive(serde::Deserialize)]
    struct Out<'a> {
        #[serde(borrow)]
        p: Option<Nested<In<'a>>>,
        q: Option<u8>,
    }

    #[test]
    fn nested_objects_read_in_one_pass() {
        let o: Out = serde_json::from_str(r#"{"p":{"x":"a\n","y":[1,{"z":2}]},"q":3}"#).unwrap();
        match o.p {
            Some(Nested::Object(i)) => assert_eq!(str_tok(i.x), Some(r#""a\n""#)),
            _ => panic!("an object"),
        }
        assert_eq!(o.q, Some(3));
        for v in ["[1,[2]]", "\"s\"", "true", "-1.5", "7"] {
            let text = format!(r#"{{"p":{v},"q":1}}"#);
            let o: Out = serde_json::from_str(&text).unwrap();
            assert!(matches!(o.p, Some(Nested::Other)), "{v}");
            assert_eq!(o.q, Some(1));
        }
        let o: Out = serde_json::from_str(r#"{"q":1}"#).unwrap();
        assert!(o.p.is_none());
        // a plain Option reads null as absent; present_nested keeps it (Other)
        let o: Out = serde_json::from_str(r#"{"p":null}"#).unwrap();
        assert!(o.p.is_none());
        #[derive(serde::Deserialize)]
        struct Kept<'a> {
            #[serde(borrow, default, deserialize_with = "present_nested")]
            p: Option<Nested<In<'a>>>,
        }
        let o: Kept = serde_json::from_str(r#"{"p":null}"#).unwrap();
        assert!(matches!(o.p, Some(Nested::Other)));
        // a key given twice inside fails the parse, as a separate parse of the field would
        assert!(serde_json::from_str::<Out>(r#"{"p":{"x":1,"x":2}}"#).is_err());
        // a number out of f64's range fails here (the caller reads the line the two-step way)
        assert!(serde_json::from_str::<Out>(r#"{"p":1e400}"#).is_err());
    }

    #[test]
    fn surrogate_escapes_are_noticed() {
        assert!(may_have_surrogate(br#"{"a":"\ud800"}"#));
        assert!(may_have_surrogate(br#"{"a":"\uDC00"}"#));
        assert!(!may_have_surrogate(br#"{"a":"\u00e9"}"#));
    }
}
