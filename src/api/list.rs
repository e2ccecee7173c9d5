//! The three list shapes the service may answer with, read into one page of items and the
//! address of the next page.
//!
//! `bare`: a JSON array, no pages. `paginator`: `{"data": [...], "next_page_url": URL|null, ...}`.
//! `resource`: `{"data": [...], "links": {"next": URL|null}, "meta": {...}}`. Following the pages
//! is the client's job (it checks the next address before sending the token there). What a
//! page says of the whole list (`total`, `last_page`, at the top or under `meta`) is kept, so
//! that a reader can check it read the whole list.

use serde_json::Value;

/// One page of a list answer.
#[derive(Debug, PartialEq)]
pub(crate) struct Page {
    pub items: Vec<Value>,
    pub next: Option<String>,
    /// Items in the whole list, when the page says.
    pub total: Option<u64>,
    /// The number of the list's last page, when the page says.
    pub last_page: Option<u64>,
}

/// Splits a list answer into its items and the next page's address; `Err` names the shape seen.
pub(crate) fn read_page(body: Value) -> Result<Page, String> {
    match body {
        Value::Array(items) => Ok(Page {
            items,
            next: None,
            total: None,
            last_page: None,
        }),
        Value::Object(mut map) => {
            let items = match map.remove("data") {
                Some(Value::Array(items)) => items,
                Some(other) => return Err(format!("`data` is {}, not a list", kind(&other))),
                None => return Err("an object without a `data` list".into()),
            };
            let next = map
                .get("next_page_url")
                .or_else(|| map.get("links").and_then(|links| links.get("next")))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            let figure = |key: &str| {
                map.get(key)
                    .or_else(|| map.get("meta").and_then(|meta| meta.get(key)))
                    .and_then(Value::as_u64)
            };
            Ok(Page {
                items,
                next,
                total: figure("total"),
                last_page: figure("last_page"),
            })
        }
        other => Err(format!("{}, not a list", kind(&other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_all_three_shapes() {
        let bare = read_page(json!([{"id": 1}])).unwrap();
        assert_eq!(bare.items.len(), 1);
        assert_eq!(bare.next, None);
        assert_eq!(bare.total, None);

        let paginator = read_page(json!({
            "current_page": 1, "data": [{"id": 1}, {"id": 2}], "last_page": 2,
            "next_page_url": "http://h/v1/inventory?page=2", "per_page": 2, "total": 3
        }))
        .unwrap();
        assert_eq!(paginator.items.len(), 2);
        assert_eq!(
            paginator.next.as_deref(),
            Some("http://h/v1/inventory?page=2")
        );
        assert_eq!((paginator.total, paginator.last_page), (Some(3), Some(2)));

        let resource = read_page(json!({
            "data": [{"id": 3}], "links": {"next": null},
            "meta": {"current_page": 2, "last_page": 2, "total": 3}
        }))
        .unwrap();
        assert_eq!(resource.items.len(), 1);
        assert_eq!(resource.next, None);
        assert_eq!((resource.total, resource.last_page), (Some(3), Some(2)));
    }

    #[test]
    fn other_shapes_are_named() {
        assert_eq!(
            read_page(json!({"items": []})).unwrap_err(),
            "an object without a `data` list"
        );
        assert_eq!(read_page(json!("x")).unwrap_err(), "a string, not a list");
    }
}
