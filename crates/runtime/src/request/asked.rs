//! The value of a field Tessera refuses unless it asks for nothing: the neutral values are a
//! few bytes (`null`, `false`, `1`, `[]`, `{"type": "text"}`), so a value is kept only while it
//! is that small; a larger one is known to ask for something without being built (a hostile
//! body can put megabytes in such a field, and a JSON tree is many times its text).

use std::cell::Cell;
use std::fmt;

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Value};

/// Scalars, keys, elements and characters of strings a kept value may have.
const BUDGET: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// The whole value (it fits the budget).
    Small(Value),
    /// Larger than any neutral value.
    Large,
}

impl Asked {
    /// Whether this is `neutral` (or null).
    pub fn is(&self, neutral: &Value) -> bool {
        matches!(self, Asked::Small(v) if v.is_null() || v == neutral)
    }
}

impl<'de> Deserialize<'de> for Asked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Asked, D::Error> {
        Ok(bounded(d, BUDGET)?.map_or(Asked::Large, Asked::Small))
    }
}

/// A value kept whole while it has at most `budget` scalars, keys, elements and characters of
/// strings; `None` past that (the rest is read and skipped, never built).
pub(super) fn bounded<'de, D: Deserializer<'de>>(
    d: D,
    budget: usize,
) -> Result<Option<Value>, D::Error> {
    let budget = Cell::new(budget);
    Bounded(&budget).deserialize(d)
}

/// Deserializes a value while `budget` lasts (`None` once it ran out; the rest is skipped).
#[derive(Clone, Copy)]
struct Bounded<'b>(&'b Cell<usize>);

impl Bounded<'_> {
    /// Takes `n` from the budget; whether there was enough.
    fn spend(&self, n: usize) -> bool {
        let left = self.0.get();
        self.0.set(left.saturating_sub(n));
        left >= n
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Option<Value>, E> {
        Ok(self.spend(1).then_some(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Option<Value>, E> {
        Ok(self.spend(1).then(|| Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Option<Value>, E> {
        Ok(self.spend(1).then(|| Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Option<Value>, E> {
        Ok(self.spend(1).then(|| Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Option<Value>, E> {
        Ok(self.spend(1 + v.len()).then(|| Value::from(v)))
    }

    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let mut items = Some(Vec::new());
        while self.spend(1) {
            match seq.next_element_seed(self)? {
                None => return Ok(items.map(Value::Array)),
                Some(Some(v)) => items.as_mut().map_or((), |i| i.push(v)),
                Some(None) => items = None,
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut entries = Some(Map::new());
        while self.spend(1) {
            let Some(key) = map.next_key::<String>()? else {
                return Ok(entries.map(Value::Object));
            };
            let fits = self.spend(key.len());
            match (map.next_value_seed(self)?, &mut entries) {
                (Some(v), Some(e)) if fits => {
                    e.insert(key, v);
                }
                _ => entries = None,
            }
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(json: &str) -> Asked {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn small_values_are_kept_and_large_ones_only_known_to_be_large() {
        assert_eq!(asked("false"), Asked::Small(Value::Bool(false)));
        assert_eq!(
            asked(r#"{"type": "text"}"#),
            Asked::Small(serde_json::json!({"type": "text"}))
        );
        assert_eq!(asked("[]"), Asked::Small(serde_json::json!([])));
        let zeros = format!("[{}0]", "0,".repeat(1_000_000));
        assert_eq!(asked(&zeros), Asked::Large);
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(asked(&deep), Asked::Large);
        let long_key = format!("{{\"{}\": 1}}", "k".repeat(100));
        assert_eq!(asked(&long_key), Asked::Large);
        // After a large value the parser is where it should be.
        #[derive(serde::Deserialize)]
        struct Two {
            a: Asked,
            b: u32,
        }
        let two: Two = serde_json::from_str(&format!(r#"{{"a": {zeros}, "b": 7}}"#)).unwrap();
        assert_eq!((two.a, two.b), (Asked::Large, 7));
    }
}
