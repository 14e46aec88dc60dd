//! The `key=value,...` syntax of policy parameters as a small serde data format.
//!
//! A policy's configuration struct derives `Deserialize` to be parsed from the items and
//! `Serialize` to be printed back, so a new parameter is one field: its doc comment, its default
//! in the struct's `Default`, and, where plain parsing of its type is not enough, a
//! `deserialize_with` that checks the range. Values parse as:
//! - integers and floats: decimal; floats also as percentages (`30%` is 0.3);
//! - `bool`: `on`/`off` (also `true`/`false`, `yes`/`no`, `1`/`0`), printed as `on`/`off`;
//! - `Duration`: through [`duration`], `30ms`, `0.2s`, `500us`, `7ns`, at most an hour;
//! - unit-only enums: their (renamed) variant names.
//!
//! One item list can fill several structs ([`Params::take`] once per struct, e.g. ART's own
//! parameters and its Replica Scheduler's); [`Params::finish`] then reports any key no struct
//! took, listing every key the structs accept.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{self, Serialize};

use crate::error::Error;

/// Longest duration a parameter may take; anything longer is a typo.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(3600);

struct Item {
    key: String,
    value: String,
    /// Taken by a struct; the rest are unknown keys.
    taken: bool,
}

/// The `key=value` items of one specification, taken struct by struct.
pub(crate) struct Params {
    policy: &'static str,
    items: Vec<Item>,
    /// The first item without `=`, reported by [`Params::finish`] once the accepted keys are
    /// known.
    malformed: Option<String>,
    /// Every key of the structs taken so far, in field order.
    accepted: Vec<&'static str>,
    /// The key that a bare first value sets.
    bare_key: Option<&'static str>,
}

impl Params {
    /// Splits `k=v,k=v`. With `bare_key`, a first item without `=` is that key's value
    /// (`fixed:2` is `fixed:r=2`).
    pub(crate) fn split(
        policy: &'static str,
        params: &str,
        bare_key: Option<&'static str>,
    ) -> Result<Self, Error> {
        let mut out = Self {
            policy,
            items: Vec::new(),
            malformed: None,
            accepted: Vec::new(),
            bare_key,
        };
        let params = params.trim();
        if params.is_empty() {
            return Ok(out);
        }
        for (i, item) in params.split(',').enumerate() {
            let item = item.trim();
            let (key, value) = match (item.split_once('='), bare_key) {
                (Some((k, v)), _) => (k.trim(), v.trim()),
                (None, Some(bare)) if i == 0 && !item.is_empty() => (bare, item),
                (None, _) => ("", item),
            };
            if key.is_empty() {
                out.malformed.get_or_insert_with(|| item.to_owned());
                continue;
            }
            if out.items.iter().any(|it| it.key == key) {
                return Err(Error::Duplicate {
                    policy,
                    key: key.to_owned(),
                });
            }
            out.items.push(Item {
                key: key.to_owned(),
                value: value.to_owned(),
                taken: false,
            });
        }
        Ok(out)
    }

    /// Deserializes the struct `T` from the items named by its fields; fields without an item
    /// keep `T`'s `#[serde(default)]`.
    pub(crate) fn take<T: DeserializeOwned>(&mut self) -> Result<T, Error> {
        let policy = self.policy;
        T::deserialize(Fields(self)).map_err(|e| match e {
            DeError::Done(e) => e,
            // Only a struct without `#[serde(default)]` gets here (a missing field).
            DeError::Expected(detail) => Error::Inconsistent { policy, detail },
        })
    }

    /// Adds `base`'s value for every key not given, so that a following [`Params::take`] starts
    /// from `base` instead of the default (a preset).
    pub(crate) fn defaults_from<T: Serialize>(&mut self, base: &T) {
        for (key, value) in items(base) {
            if !self.items.iter().any(|it| it.key == key) {
                self.items.push(Item {
                    key: key.to_owned(),
                    value,
                    taken: false,
                });
            }
        }
    }

    /// Whether `key` was given (before any [`Params::defaults_from`] adds it): a parameter that
    /// the configuration chosen so far lacks can be refused by name.
    pub(crate) fn given(&self, key: &str) -> bool {
        self.items.iter().any(|it| it.key == key)
    }

    /// Every item must have been well-formed and taken.
    pub(crate) fn finish(self) -> Result<(), Error> {
        let accepted = if self.accepted.is_empty() {
            "(none)".to_owned()
        } else {
            let policy = self.policy;
            let described: Vec<String> = self
                .accepted
                .iter()
                .map(|&key| match self.bare_key {
                    Some(bare) if bare == key => format!("{key} (or bare, `{policy}:VALUE`)"),
                    _ => key.to_owned(),
                })
                .collect();
            described.join(", ")
        };
        if let Some(item) = self.malformed {
            return Err(Error::Malformed {
                policy: self.policy,
                item,
                accepted,
            });
        }
        match self.items.into_iter().find(|it| !it.taken) {
            None => Ok(()),
            Some(it) => Err(Error::UnknownParameter {
                policy: self.policy,
                key: it.key,
                accepted,
            }),
        }
    }
}

/// `"k=v"` for each field of `value` that differs from `default` (every field without one),
/// in field order.
pub(crate) fn changed<T: Serialize>(value: &T, default: Option<&T>) -> Vec<String> {
    let base = default.map(items).unwrap_or_default();
    items(value)
        .into_iter()
        .filter(|item| !base.contains(item))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// A field parsed as its type, then checked against `range`; any failure is reported as
/// `expected` (which should state the range).
pub(crate) fn in_range<'de, D, T>(
    d: D,
    range: RangeInclusive<T>,
    expected: &'static str,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: serde::Deserialize<'de> + PartialOrd,
{
    match T::deserialize(d) {
        Ok(v) if range.contains(&v) => Ok(v),
        _ => Err(de::Error::custom(expected)),
    }
}

/// `Duration` fields: `#[serde(with = "params::duration")]`.
pub(crate) mod duration {
    use super::{de, parse_duration, Deserializer, DisplayDuration, Duration};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        parse_duration(&s)
            .ok_or_else(|| de::Error::custom("a duration up to 1h like `30ms`, `0.2s`, `500us`"))
    }

    pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&DisplayDuration(*d))
    }
}

/// `30ms`, `0.2s`, `500us`, `100ns`, `1.5s`; at most [`MAX_DURATION`].
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = s.split_at(split);
    let nanos_per_unit = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let nanos = (value * nanos_per_unit).round();
    let max = MAX_DURATION.as_secs_f64() * 1e9;
    if !nanos.is_finite() || !(0.0..=max).contains(&nanos) {
        return None;
    }
    // In range [0, 3.6e12]: the conversion is exact.
    Some(Duration::from_nanos(nanos as u64))
}

/// The shortest exact unit: `30ms`, `1500us`, `7ns`.
struct DisplayDuration(Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.as_nanos();
        if n == 0 {
            f.write_str("0ms")
        } else if n % 1_000_000_000 == 0 {
            write!(f, "{}s", n / 1_000_000_000)
        } else if n % 1_000_000 == 0 {
            write!(f, "{}ms", n / 1_000_000)
        } else if n % 1_000 == 0 {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

// ---- deserializing: items -> struct ----

/// While deserializing: `Expected` is what a value should have been (the map access adds the key
/// and the value); `Done` is a finished error.
#[derive(Debug)]
enum DeError {
    Expected(String),
    Done(Error),
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expected(e) => write!(f, "expected {e}"),
            Self::Done(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Expected(msg.to_string())
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self::Expected(one_of(expected))
    }
}

/// "`a` or `b`", "`a`, `b` or `c`".
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => "nothing".to_owned(),
    }
}

/// The item list as a struct.
struct Fields<'a>(&'a mut Params);

impl<'de> Deserializer<'de> for Fields<'_> {
    type Error = DeError;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.0.accepted.extend_from_slice(fields);
        visitor.visit_map(FieldItems {
            params: self.0,
            fields,
            next: 0,
            current: None,
        })
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, DeError> {
        Err(DeError::Expected(
            "policy parameters are a struct".to_owned(),
        ))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The items whose keys are the struct's fields, in the order given.
struct FieldItems<'a> {
    params: &'a mut Params,
    fields: &'static [&'static str],
    next: usize,
    current: Option<usize>,
}

impl<'de> MapAccess<'de> for FieldItems<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        while let Some(item) = self.params.items.get_mut(self.next) {
            self.next += 1;
            if item.taken || !self.fields.contains(&item.key.as_str()) {
                continue;
            }
            item.taken = true;
            self.current = Some(self.next - 1);
            return seed
                .deserialize(StrDeserializer::<DeError>::new(&item.key))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let item = self
            .current
            .take()
            .and_then(|i| self.params.items.get(i))
            .ok_or_else(|| DeError::Expected("a key before its value".to_owned()))?;
        seed.deserialize(Value(&item.value)).map_err(|e| match e {
            DeError::Expected(expected) => DeError::Done(Error::BadValue {
                policy: self.params.policy,
                key: item.key.clone(),
                value: item.value.clone(),
                expected,
            }),
            done @ DeError::Done(_) => done,
        })
    }
}

/// One value's text.
struct Value<'a>(&'a str);

impl Value<'_> {
    fn number<T: std::str::FromStr>(&self, expected: &str) -> Result<T, DeError> {
        self.0
            .parse()
            .map_err(|_| DeError::Expected(expected.to_owned()))
    }

    fn float(&self) -> Result<f64, DeError> {
        let parsed = match self.0.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|x| x / 100.0),
            None => self.0.parse::<f64>(),
        };
        parsed.map_err(|_| DeError::Expected("a number (or a percentage `30%`)".to_owned()))
    }
}

macro_rules! integers {
    ($($method:ident $visit:ident $t:ty;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            visitor.$visit(self.number::<$t>("an integer")?)
        }
    )*};
}

impl<'de> Deserializer<'de> for Value<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_str(self.0)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.0 {
            "on" | "true" | "yes" | "1" => visitor.visit_bool(true),
            "off" | "false" | "no" | "0" => visitor.visit_bool(false),
            _ => Err(DeError::Expected("`on` or `off`".to_owned())),
        }
    }

    integers! {
        deserialize_u8 visit_u8 u8;
        deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32;
        deserialize_u64 visit_u64 u64;
        deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16;
        deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64;
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_f64(self.float()?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_enum(StrDeserializer::<DeError>::new(self.0))
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

// ---- serializing: struct -> items ----

/// Every serialized field of `value` as `(key, text)`, in field order; `None` fields are left
/// out.
fn items<T: Serialize>(value: &T) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    // Only this crate's configuration structs come here; a field type the format cannot print
    // would end the list at that field, which the tests (debug builds) turn into a failure.
    let printed = value.serialize(StructSer(&mut out));
    debug_assert!(
        printed.is_ok(),
        "a policy parameter type that cannot be printed"
    );
    out
}

#[derive(Debug)]
struct SerError;

impl fmt::Display for SerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("policy parameters print only from a struct of plain values")
    }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Self
    }
}

/// Serializer methods that this format does not support.
macro_rules! unsupported {
    ($($method:ident($($arg:ty),*);)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<Self::Ok, SerError> {
            Err(SerError)
        }
    )*};
}

/// Serializer compound types that this format does not support.
macro_rules! no_compounds {
    () => {
        type SerializeSeq = ser::Impossible<Self::Ok, SerError>;
        type SerializeTuple = ser::Impossible<Self::Ok, SerError>;
        type SerializeTupleStruct = ser::Impossible<Self::Ok, SerError>;
        type SerializeTupleVariant = ser::Impossible<Self::Ok, SerError>;
        type SerializeMap = ser::Impossible<Self::Ok, SerError>;
        type SerializeStructVariant = ser::Impossible<Self::Ok, SerError>;

        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, SerError> {
            Err(SerError)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, SerError> {
            Err(SerError)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, SerError> {
            Err(SerError)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, SerError> {
            Err(SerError)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, SerError> {
            Err(SerError)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, SerError> {
            Err(SerError)
        }
        fn serialize_newtype_variant<T: ?Sized + Serialize>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, SerError> {
            Err(SerError)
        }
    };
}

/// The struct: collects its fields.
struct StructSer<'a>(&'a mut Vec<(&'static str, String)>);

impl<'a> ser::Serializer for StructSer<'a> {
    type Ok = ();
    type Error = SerError;
    type SerializeStruct = Self;

    no_compounds!();

    unsupported! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_u8(u8); serialize_u16(u16); serialize_u32(u32);
        serialize_u64(u64); serialize_f32(f32); serialize_f64(f64); serialize_char(char);
        serialize_str(&str); serialize_bytes(&[u8]); serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), SerError> {
        Err(SerError)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), SerError> {
        Err(SerError)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, SerError> {
        Ok(self)
    }
}

impl ser::SerializeStruct for StructSer<'_> {
    type Ok = ();
    type Error = SerError;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerError> {
        if let Some(text) = value.serialize(ValueSer)? {
            self.0.push((key, text));
        }
        Ok(())
    }

    fn end(self) -> Result<(), SerError> {
        Ok(())
    }
}

/// One field's value as text; `None` for an absent option.
struct ValueSer;

macro_rules! displayed {
    ($($method:ident($t:ty);)*) => {$(
        fn $method(self, v: $t) -> Result<Self::Ok, SerError> {
            Ok(Some(v.to_string()))
        }
    )*};
}

impl ser::Serializer for ValueSer {
    type Ok = Option<String>;
    type Error = SerError;
    type SerializeStruct = ser::Impossible<Self::Ok, SerError>;

    no_compounds!();

    displayed! {
        serialize_i8(i8); serialize_i16(i16); serialize_i32(i32); serialize_i64(i64);
        serialize_u8(u8); serialize_u16(u16); serialize_u32(u32); serialize_u64(u64);
        serialize_f32(f32); serialize_f64(f64); serialize_char(char); serialize_str(&str);
    }

    unsupported! {
        serialize_bytes(&[u8]); serialize_unit(); serialize_unit_struct(&'static str);
    }

    fn serialize_bool(self, v: bool) -> Result<Self::Ok, SerError> {
        Ok(Some(if v { "on" } else { "off" }.to_owned()))
    }

    fn serialize_none(self) -> Result<Self::Ok, SerError> {
        Ok(None)
    }

    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<Self::Ok, SerError> {
        v.serialize(self)
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Self::Ok, SerError> {
        Ok(Some(variant.to_owned()))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Self::Ok, SerError> {
        v.serialize(self)
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, SerError> {
        Err(SerError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        #[default]
        Slow,
        Fast,
    }

    /// A new parameter is one field here: nothing else parses or prints it.
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(default)]
    struct Example {
        #[serde(with = "duration")]
        wait: Duration,
        count: u32,
        on: bool,
        share: f64,
        mode: Mode,
        limit: Option<u32>,
    }

    impl Default for Example {
        fn default() -> Self {
            Self {
                wait: Duration::from_millis(5),
                count: 1,
                on: true,
                share: 0.5,
                mode: Mode::Slow,
                limit: None,
            }
        }
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(default)]
    struct Other {
        extra: u32,
    }

    fn take(s: &str) -> Result<(Example, Other), Error> {
        let mut p = Params::split("ex", s, Some("count"))?;
        let ex = p.take()?;
        let other = p.take()?;
        p.finish()?;
        Ok((ex, other))
    }

    #[test]
    fn fields_parse_print_and_report_by_key() {
        let (ex, other) =
            take("3, wait=1.5ms,on=off,share=25%,mode=fast,limit=7,extra=2").expect("valid");
        assert_eq!(
            ex,
            Example {
                wait: Duration::from_micros(1500),
                count: 3,
                on: false,
                share: 0.25,
                mode: Mode::Fast,
                limit: Some(7),
            }
        );
        assert_eq!(other.extra, 2);
        assert_eq!(
            changed(&ex, Some(&Example::default())),
            [
                "wait=1500us",
                "count=3",
                "on=off",
                "share=0.25",
                "mode=fast",
                "limit=7"
            ]
        );
        assert!(changed(&Example::default(), Some(&Example::default())).is_empty());
        assert_eq!(take("").expect("empty").0, Example::default());

        let unknown = take("count=2,cuont=3")
            .expect_err("unknown key")
            .to_string();
        assert!(
            unknown.contains("`cuont`")
                && unknown
                    .contains("wait, count (or bare, `ex:VALUE`), on, share, mode, limit, extra"),
            "{unknown}"
        );
        let bad = take("mode=medium").expect_err("bad enum").to_string();
        assert!(
            bad.contains("`medium`") && bad.contains("`mode`") && bad.contains("`slow` or `fast`"),
            "{bad}"
        );
        let bad = take("count=-1").expect_err("bad integer").to_string();
        assert!(
            bad.contains("`count`") && bad.contains("an integer"),
            "{bad}"
        );
        let bad = take("on=maybe").expect_err("bad bool").to_string();
        assert!(bad.contains("`on` or `off`"), "{bad}");
        let bad = take("share=lots").expect_err("bad number").to_string();
        assert!(
            bad.contains("`lots`") && bad.contains("percentage"),
            "{bad}"
        );
        let bad = take("wait=3").expect_err("bad duration").to_string();
        assert!(bad.contains("duration"), "{bad}");
    }

    #[test]
    fn defaults_from_a_base_keep_explicit_values() {
        let base = Example {
            count: 9,
            share: 0.1,
            ..Example::default()
        };
        let mut p = Params::split("ex", "share=0.2", None).expect("split");
        p.defaults_from(&base);
        let ex: Example = p.take().expect("valid");
        p.finish().expect("all taken");
        assert_eq!((ex.count, ex.share), (9, 0.2));
    }

    #[test]
    fn one_of_lists_names() {
        assert_eq!(one_of(&["a"]), "`a`");
        assert_eq!(one_of(&["a", "b"]), "`a` or `b`");
        assert_eq!(one_of(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
