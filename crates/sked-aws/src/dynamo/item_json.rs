//! A table item as JSON in DynamoDB's own wire form (`{"name": {"S": "…"}}`), so a run's item
//! can travel in its SQS message (`written_runs`): only the types sked's items use (`S`, `N`,
//! `BOOL`, `NULL`, `M`, `L`); an item holding any other is not encoded.

use super::codec::Item;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value, json};

/// `item` as JSON, or `None` if it holds a type this encoding leaves out.
pub fn to_json(item: &Item) -> Option<Value> {
    let mut out = Map::with_capacity(item.len());
    for (name, value) in item {
        out.insert(name.clone(), attribute_to_json(value)?);
    }
    Some(Value::Object(out))
}

/// The item `value` encodes, or `None` if it is not one [`to_json`] writes.
pub fn from_json(value: &Value) -> Option<Item> {
    value
        .as_object()?
        .iter()
        .map(|(name, v)| Some((name.clone(), attribute_from_json(v)?)))
        .collect()
}

fn attribute_to_json(value: &AttributeValue) -> Option<Value> {
    Some(match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(b) => json!({ "NULL": b }),
        AttributeValue::M(m) => json!({ "M": to_json(m)? }),
        AttributeValue::L(l) => Value::Object(Map::from_iter([(
            "L".to_string(),
            Value::Array(l.iter().map(attribute_to_json).collect::<Option<_>>()?),
        )])),
        _ => return None,
    })
}

fn attribute_from_json(value: &Value) -> Option<AttributeValue> {
    let object = value.as_object()?;
    let (kind, inner) = object.iter().next().filter(|_| object.len() == 1)?;
    Some(match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str()?.to_string()),
        "N" => AttributeValue::N(inner.as_str()?.to_string()),
        "BOOL" => AttributeValue::Bool(inner.as_bool()?),
        "NULL" => AttributeValue::Null(inner.as_bool()?),
        "M" => AttributeValue::M(from_json(inner)?),
        "L" => AttributeValue::L(
            inner
                .as_array()?
                .iter()
                .map(attribute_from_json)
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_sked_writes_comes_back_as_it_was() {
        let item: Item = Item::from([
            ("pk".to_string(), AttributeValue::S("T#t#J#j".into())),
            ("rv".to_string(), AttributeValue::N("7".into())),
            ("flag".to_string(), AttributeValue::Bool(true)),
            ("none".to_string(), AttributeValue::Null(true)),
            (
                "labels".to_string(),
                AttributeValue::M(Item::from([("team".to_string(), AttributeValue::S("ops".into()))])),
            ),
            (
                "list".to_string(),
                AttributeValue::L(vec![AttributeValue::S("a".into()), AttributeValue::N("1".into())]),
            ),
        ]);
        let encoded = to_json(&item).unwrap();
        assert_eq!(encoded["rv"], json!({"N": "7"}));
        let text = serde_json::to_string(&encoded).unwrap();
        assert_eq!(from_json(&serde_json::from_str(&text).unwrap()), Some(item));
    }

    #[test]
    fn other_types_and_malformed_json_are_left_out() {
        let binary = Item::from([("b".to_string(), AttributeValue::Ss(vec!["x".into()]))]);
        assert_eq!(to_json(&binary), None);
        assert_eq!(from_json(&json!({"a": {"S": 1}})), None);
        assert_eq!(from_json(&json!({"a": {"S": "x", "N": "1"}})), None);
        assert_eq!(from_json(&json!(["a"])), None);
    }
}
