//! XML exports: one record per repeated element, fields from child elements (nested paths such
//! as `Prices/Internet`), attributes (`@VIN`), repeated children as lists (but those told apart
//! by a `type`-like attribute, `Price[@type=Internet]`, are fields of their own), CDATA and the
//! predefined entities. No entity is ever expanded beyond those: a DOCTYPE declaring entities or
//! pointing outside the file is refused, and so is any other named entity.

use super::tracked::Tracked;
use super::{FeedError, Item, Record, Schema, DEPTH_LIMIT, RECORD_LIMIT};
use quick_xml::errors::SyntaxError;
use quick_xml::events::{BytesRef, BytesStart, Event};
use std::io::BufRead;

/// How much of a file the record-element detection reads at most.
const DETECT_BUDGET: u64 = 1024 * 1024;

/// Reads an XML export one record element at a time.
#[derive(Debug)]
pub struct XmlReader<R: BufRead> {
    reader: quick_xml::Reader<Tracked<R>>,
    buf: Vec<u8>,
    element: String,
    schema: Schema,
    depth: usize,
    in_record: bool,
    /// Element names below the record element, down to the current one.
    path: Vec<String>,
    /// Text gathered for each open element of the record (index 0: the record element).
    texts: Vec<String>,
    index: u64,
    warnings: Vec<String>,
    /// Other elements read as records, detected beside the record element (`<trailer>`
    /// beside `<truck>`); none when the record element was named.
    siblings: Vec<String>,
    /// Per open element of the record (as `path`), its qualified path when an attribute
    /// tells it from its namesakes ([`qualified`]): its text is a field under that path too.
    kinds: Vec<Option<String>>,
    /// Per open element of the record (as `texts`: the record itself first), what a coded
    /// group needs of its children ([`Group`]).
    groups: Vec<Group>,
}

/// An element of a record as its children describe it, for groups told apart by a code
/// child rather than an attribute: STAR's `<Price><PriceCode>Vehicle Advertised
/// Price</PriceCode><ChargeAmount currencyID="USD">31995.00</ChargeAmount></Price>` and
/// `<ColorGroup><ColorItemCode>Exterior</ColorItemCode><ColorName>Summit
/// White</ColorName></ColorGroup>` ([`coded`]).
#[derive(Debug, Default)]
struct Group {
    /// Its child elements that hold only text: name and text.
    leaves: Vec<(String, String)>,
    /// A child element has children of its own: not a group of leaves.
    nested: bool,
    /// A child says the group is not to be shown (STAR's `PriceHideIndicator`): nothing
    /// coded inside it is a field.
    hidden: bool,
    /// Coded fields found inside it, kept until it ends (a hide indicator may come after).
    coded: Vec<(String, String)>,
}

/// The record element of a file, as detected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordElement {
    /// Empty for a document whose root element holds nothing (an empty delta): no record.
    pub name: String,
    /// Other children of its parent that are records too: most of their fields are the
    /// record's (`trailer` beside `truck`, both with `vin`, `year`, `make`, …).
    pub siblings: Vec<String>,
}

impl<R: BufRead> XmlReader<R> {
    /// Reads records detected in the file: `element`'s, and its siblings' that have fields of
    /// their own.
    pub fn detected(input: R, element: RecordElement) -> Self {
        let mut reader = XmlReader::new(input, element.name);
        if !element.siblings.is_empty() {
            let names: Vec<String> = element.siblings.iter().map(|n| format!("<{n}>")).collect();
            reader.warnings.push(format!(
                "also reading {} as records: they have the fields of <{}>; name the record \
                 element in a profile (record = \"{}\") to read only those",
                names.join(", "),
                reader.element,
                reader.element
            ));
        }
        reader.siblings = element.siblings;
        reader
    }

    /// Reads records named `element` (a local name, any depth).
    pub fn new(input: R, element: String) -> Self {
        let mut reader = quick_xml::Reader::from_reader(Tracked::new(input, RECORD_LIMIT));
        let config = reader.config_mut();
        config.trim_text(false);
        config.check_end_names = true;
        XmlReader {
            reader,
            buf: Vec::new(),
            element,
            schema: Schema::default(),
            depth: 0,
            in_record: false,
            path: Vec::new(),
            texts: Vec::new(),
            index: 0,
            warnings: Vec::new(),
            siblings: Vec::new(),
            kinds: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Whether an element named `name` starting outside any record begins one (at any depth).
    fn begins_record(&self, name: &str) -> bool {
        name == self.element || self.siblings.iter().any(|n| n == name)
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub fn describe(&self) -> String {
        if self.element.is_empty() {
            return "XML, its root element empty".to_owned();
        }
        let mut also = String::new();
        for name in &self.siblings {
            also.push_str(&format!(" or <{name}>"));
        }
        format!("XML, one record per <{}>{also}", self.element)
    }

    fn line(&self) -> u64 {
        self.reader.get_ref().newlines() + 1
    }

    /// Reads the next record into `record`.
    pub fn next(&mut self, record: &mut Record) -> Result<Item, FeedError> {
        loop {
            if !self.in_record {
                self.reader.get_mut().mark();
            }
            self.buf.clear();
            let event = match self.reader.read_event_into(&mut self.buf) {
                Ok(event) => event.into_owned(),
                Err(e) => return Err(self.error(e)),
            };
            match event {
                Event::Start(e) => {
                    self.depth += 1;
                    if self.depth > DEPTH_LIMIT {
                        return Err(FeedError::TooDeep { line: self.line() });
                    }
                    let name = local_name(&e);
                    if self.in_record {
                        let prefix = self.child_path(&name);
                        self.attributes(&e, &format!("{prefix}/"), record)?;
                        let kind = qualified(&e, &name).map(|q| self.child_path(&q));
                        self.path.push(name);
                        self.kinds.push(kind);
                        self.texts.push(String::new());
                        self.groups.push(Group::default());
                    } else if self.begins_record(&name) {
                        self.begin(record);
                        self.attributes(&e, "", record)?;
                    }
                }
                Event::Empty(e) => {
                    let name = local_name(&e);
                    if self.in_record {
                        let prefix = self.child_path(&name);
                        self.attributes(&e, &format!("{prefix}/"), record)?;
                    } else if self.begins_record(&name) {
                        self.begin(record);
                        self.attributes(&e, "", record)?;
                        self.in_record = false;
                        return Ok(Item::Record);
                    }
                }
                Event::Text(t) => {
                    if let Some(text) = self.texts.last_mut() {
                        text.push_str(&t.xml10_content());
                    }
                }
                Event::CData(c) => {
                    if let Some(text) = self.texts.last_mut() {
                        text.push_str(&c.into_inner());
                    }
                }
                Event::GeneralRef(r) => {
                    let c = resolve_reference(&r).ok_or_else(|| FeedError::Xml {
                        line: self.line(),
                        reason: format!(
                            "the entity &{}; is not one of XML's own (&amp; &lt; &gt; &quot; &apos;); lotsync expands no others",
                            r.into_inner()
                        ),
                    })?;
                    if let Some(text) = self.texts.last_mut() {
                        text.push(c);
                    }
                }
                Event::End(_) => {
                    self.depth = self.depth.saturating_sub(1);
                    if !self.in_record {
                        continue;
                    }
                    let text = self.texts.pop().unwrap_or_default();
                    let group = self.groups.pop().unwrap_or_default();
                    if self.path.is_empty() {
                        for (name, value) in group.coded {
                            let id = self.field_id(&name);
                            record.push(id, &value);
                        }
                        self.in_record = false;
                        return Ok(Item::Record);
                    }
                    let text = text.trim();
                    let kind = self.kinds.pop().flatten();
                    let name = self.path.join("/");
                    if !text.is_empty() {
                        let id = self.field_id(&name);
                        record.push(id, text);
                        if let Some(kind) = kind {
                            let id = self.field_id(&kind);
                            record.push(id, text);
                        }
                    }
                    let leaf = group.leaves.is_empty() && !group.nested;
                    let coded = coded(&name, &group);
                    if let Some(parent) = self.groups.last_mut() {
                        let own = self.path.last().map(String::as_str).unwrap_or_default();
                        if leaf {
                            parent.hidden |= own.ends_with("HideIndicator")
                                && matches!(text, "true" | "1" | "Y" | "y" | "Yes" | "yes");
                            parent.leaves.push((own.to_owned(), text.to_owned()));
                        } else {
                            parent.nested = true;
                        }
                        if !group.hidden {
                            parent.coded.extend(group.coded);
                            parent.coded.extend(coded);
                        }
                    }
                    self.path.pop();
                }
                Event::DocType(d) => {
                    let dtd = d.into_inner();
                    let what = if dtd.contains("<!ENTITY") {
                        Some("entity declarations")
                    } else if dtd.contains("SYSTEM") || dtd.contains("PUBLIC") {
                        Some("an external reference")
                    } else {
                        None
                    };
                    if let Some(what) = what {
                        return Err(FeedError::Doctype {
                            line: self.line(),
                            what,
                        });
                    }
                }
                Event::Eof => {
                    if self.depth > 0 || self.in_record {
                        return Err(FeedError::Truncated { line: self.line() });
                    }
                    if self.index == 0 && (!self.schema.is_empty() || self.element.is_empty()) {
                        return Ok(Item::End);
                    }
                    if self.index == 0 {
                        return Err(FeedError::NoRecordElement {
                            element: self.element.clone(),
                        });
                    }
                    return Ok(Item::End);
                }
                Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            }
        }
    }

    fn begin(&mut self, record: &mut Record) {
        record.clear();
        record.line = self.line();
        self.index += 1;
        record.index = self.index;
        self.in_record = true;
        self.path.clear();
        self.kinds.clear();
        self.texts.clear();
        self.texts.push(String::new());
        self.groups.clear();
        self.groups.push(Group::default());
    }

    fn child_path(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.path.join("/"))
        }
    }

    /// Adds the element's attributes as `{prefix}@name` fields.
    fn attributes(
        &mut self,
        e: &BytesStart<'_>,
        prefix: &str,
        record: &mut Record,
    ) -> Result<(), FeedError> {
        for attribute in e.attributes() {
            let attribute = attribute.map_err(|err| FeedError::Xml {
                line: self.line(),
                reason: err.to_string(),
            })?;
            let key = attribute.key.local_name().as_ref().to_owned();
            let value = attribute
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|err| FeedError::Xml {
                    line: self.line(),
                    reason: format!("attribute {key}: {err}"),
                })?;
            let value = value.trim();
            if !value.is_empty() {
                let id = self.field_id(&format!("{prefix}@{key}"));
                record.push(id, value);
            }
        }
        Ok(())
    }

    fn field_id(&mut self, name: &str) -> u32 {
        match self.schema.find(name) {
            Some(id) => id,
            None => self.schema.push(name.to_owned()),
        }
    }

    fn error(&self, e: quick_xml::Error) -> FeedError {
        let line = self.line();
        if self.reader.get_ref().over_limit() {
            return FeedError::RecordTooLarge { line };
        }
        match e {
            quick_xml::Error::Encoding(_) => FeedError::Xml {
                line,
                reason: "not UTF-8; lotsync reads XML exports in UTF-8 only".into(),
            },
            quick_xml::Error::Io(io) => {
                FeedError::Io(std::io::Error::new(io.kind(), io.to_string()))
            }
            // The input ended inside markup (a tag, an attribute value, a comment, CDATA): a file
            // cut there. Any other syntax error (`<!x`) is a broken file, not a short one.
            quick_xml::Error::IllFormed(quick_xml::errors::IllFormedError::MissingEndTag(_))
            | quick_xml::Error::Syntax(
                SyntaxError::UnclosedPI
                | SyntaxError::UnclosedXmlDecl
                | SyntaxError::UnclosedComment
                | SyntaxError::UnclosedDoctype
                | SyntaxError::UnclosedCData
                | SyntaxError::UnclosedTag
                | SyntaxError::UnclosedSingleQuotedAttributeValue
                | SyntaxError::UnclosedDoubleQuotedAttributeValue,
            ) => FeedError::Truncated { line },
            other => FeedError::Xml {
                line,
                reason: other.to_string(),
            },
        }
    }
}

fn local_name(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_owned()
}

/// Attributes that say which of several elements of one name an element is.
const KIND_ATTRIBUTES: [&str; 6] = ["type", "kind", "name", "category", "label", "qualifier"];

/// The name of an element told apart from its namesakes by an attribute, `Price[@type=Internet]`
/// for `<Price type="Internet">`: its text is a field under that name too, besides the plain
/// path (which stays a list of every such element's text, as photos tagged by kind want).
/// Values that are numbers (`<Photo name="1">`) or hold `/`, `[` or `]` name no kind.
fn qualified(e: &BytesStart<'_>, name: &str) -> Option<String> {
    for attribute in e.attributes().flatten() {
        let key = attribute.key.local_name();
        if !KIND_ATTRIBUTES
            .iter()
            .any(|k| k.eq_ignore_ascii_case(key.as_ref()))
        {
            continue;
        }
        let Ok(value) = attribute.normalized_value(quick_xml::XmlVersion::Implicit1_0) else {
            continue;
        };
        let value = value.trim();
        if names_a_kind(value) {
            return Some(format!("{name}[@{}={value}]", key.as_ref()));
        }
    }
    None
}

/// The field a group of leaves told apart by a code child makes: `Pricing/Price[PriceCode=
/// Vehicle Advertised Price]` with the text of its amount (`ChargeAmount`), or
/// `Vehicle/ColorGroup[ColorItemCode=Exterior]` with its name (`ColorName`). The code is the
/// first child named `…Code` whose value names a kind (as [`qualified`] judges an
/// attribute's); the value is the first child named `…Amount`, else `…Name`, else
/// `…Description`. None for a group with no such pair, or with children of its own.
fn coded(path: &str, group: &Group) -> Option<(String, String)> {
    if group.nested {
        return None;
    }
    let (code, kind) = group
        .leaves
        .iter()
        .find(|(name, _)| name.ends_with("Code"))?;
    if !names_a_kind(kind) {
        return None;
    }
    let value = ["Amount", "Name", "Description"]
        .iter()
        .find_map(|suffix| {
            group
                .leaves
                .iter()
                .find(|(name, text)| name.ends_with(suffix) && !text.is_empty())
        })?;
    Some((format!("{path}[{code}={kind}]"), value.1.clone()))
}

/// Whether an attribute's or a code's value names a kind: a short word, not a number nor
/// anything that would break a path.
fn names_a_kind(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 40
        && value.chars().any(char::is_alphabetic)
        && !value.contains(['/', '[', ']'])
}

/// `&amp;` and friends, and character references; `None` for any other entity.
fn resolve_reference(r: &BytesRef<'_>) -> Option<char> {
    if r.is_char_ref() {
        return r.resolve_char_ref().ok().flatten();
    }
    match &*r.clone().into_inner() {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// Record elements a published standard names: STAR 5's vehicle inventory line item (one
/// vehicle with its stock number, prices and mileage; `docs/header-vocabulary.md`, "STAR").
const STANDARD_RECORDS: &[&str] = &["VehicleInventoryVehicleLineItem"];

/// Whether a value looks like a VIN: 17 characters of the VIN alphabet (no I, O, Q), letters
/// and digits both, a check digit (a digit or X) in the ninth place. Enough to tell which
/// element holds one vehicle; the mapper checks the VIN itself.
fn vin_like(text: &[u8]) -> bool {
    let text = text.trim_ascii();
    text.len() == 17
        && text
            .iter()
            .all(|c| c.is_ascii_digit() || (c.is_ascii_alphabetic() && !b"IOQioq".contains(c)))
        && (text[8].is_ascii_digit() || text[8].eq_ignore_ascii_case(&b'X'))
        && text.iter().filter(|c| c.is_ascii_digit()).count() >= 3
        && text.iter().filter(|c| c.is_ascii_alphabetic()).count() >= 3
}

/// The record element of a file that does not name one (reading at most `DETECT_BUDGET`
/// bytes): the element a standard names ([`STANDARD_RECORDS`]); else, of the elements with
/// fields of their own that repeat under one parent, the shallowest each of whose instances
/// holds one VIN, else the shallowest; failing that, the element reached from the root
/// through single-child wrappers (`<Feed><Units><Unit/></Units></Feed>`).
pub(super) fn detect_record_element<R: BufRead>(input: R) -> Result<RecordElement, FeedError> {
    struct Node {
        name: String,
        children: Vec<usize>,
        attributes: usize,
        /// Its attributes' and children's names, for telling sibling records.
        fields: Vec<String>,
        /// VIN-like values in it and below it.
        vins: usize,
    }
    let mut reader = quick_xml::Reader::from_reader(Tracked::new(input, DETECT_BUDGET));
    let mut nodes: Vec<Node> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    // (depth, parent node, element name) of every element that repeats under a parent.
    let mut repeating: Vec<(usize, usize, String)> = Vec::new();
    let mut standard: Option<String> = None;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let event = match reader.read_event_into(&mut buf) {
            Ok(event) => event,
            // Past the budget, or broken further on: decide on what was read; the full read
            // reports any real error with its line.
            Err(_) => break,
        };
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e), false),
            Event::Empty(e) => (Some(e), true),
            Event::End(_) => {
                open.pop();
                continue;
            }
            Event::Text(t) => {
                if vin_like(t.as_ref().as_bytes()) {
                    for &id in &open {
                        nodes[id].vins += 1;
                    }
                }
                continue;
            }
            Event::Eof => break,
            Event::DocType(d) if d.contains("<!ENTITY") || d.contains("SYSTEM") => {
                return Err(FeedError::Doctype {
                    line: reader.get_ref().newlines() + 1,
                    what: if d.contains("<!ENTITY") {
                        "entity declarations"
                    } else {
                        "an external reference"
                    },
                })
            }
            _ => continue,
        };
        let Some(e) = start else { continue };
        if open.len() >= DEPTH_LIMIT {
            return Err(FeedError::TooDeep {
                line: reader.get_ref().newlines() + 1,
            });
        }
        let name = local_name(e);
        if standard.is_none() && STANDARD_RECORDS.contains(&name.as_str()) {
            standard = Some(name.clone());
        }
        let id = nodes.len();
        let vins = e
            .attributes()
            .flatten()
            .filter(|a| vin_like(a.value.as_bytes()))
            .count();
        for &open_id in &open {
            nodes[open_id].vins += vins;
        }
        nodes.push(Node {
            name: name.clone(),
            children: Vec::new(),
            attributes: e.attributes().count(),
            fields: e
                .attributes()
                .flatten()
                .map(|a| a.key.local_name().as_ref().to_owned())
                .collect(),
            vins,
        });
        let depth = open.len() + 1;
        if let Some(&parent) = open.last() {
            nodes[parent].fields.push(name.clone());
            // A twin of an earlier sibling is a record candidate if that sibling (complete by
            // now) has fields of its own: repeated leaves such as <Photo> are lists instead,
            // and so are leaves told apart by one attribute (<Price type="Internet">).
            let repeats = nodes[parent].children.iter().any(|&c| {
                nodes[c].name == name && (nodes[c].attributes > 1 || !nodes[c].children.is_empty())
            });
            nodes[parent].children.push(id);
            if repeats && !repeating.iter().any(|(_, p, n)| *p == parent && *n == name) {
                repeating.push((depth, parent, name));
            }
        }
        if !empty {
            open.push(id);
        }
    }
    if let Some(name) = standard {
        return Ok(RecordElement {
            name,
            siblings: Vec::new(),
        });
    }
    // Each instance one vehicle: exactly one VIN in it (a <Pricing> repeated inside each
    // vehicle holds none, a <Dealer> repeated above them holds many).
    let one_vin_each = |(_, parent, name): &&(usize, usize, String)| {
        nodes[*parent]
            .children
            .iter()
            .filter(|&&c| nodes[c].name == *name)
            .all(|&c| nodes[c].vins == 1)
    };
    let shallowest = |list: Vec<&(usize, usize, String)>| {
        list.into_iter().min_by_key(|(depth, _, _)| *depth).cloned()
    };
    let best = shallowest(repeating.iter().filter(one_vin_each).collect())
        .or_else(|| shallowest(repeating.iter().collect()));
    if let Some((_, parent, name)) = best {
        let mut found = RecordElement {
            name,
            siblings: Vec::new(),
        };
        // Siblings most of whose fields (two at least) are the records' are records of another
        // kind (`<trailer>` beside `<truck>`); others (`<dealer>`, `<count>`) are not, nor
        // are elements named for vehicles gone (`<SoldVehicle>`).
        let children = &nodes[parent].children;
        let record_fields: Vec<&String> = children
            .iter()
            .filter(|&&c| nodes[c].name == found.name)
            .flat_map(|&c| &nodes[c].fields)
            .collect();
        for &c in children {
            let sibling = &nodes[c];
            let shared = sibling
                .fields
                .iter()
                .filter(|f| record_fields.contains(f))
                .count();
            let lower = sibling.name.to_ascii_lowercase();
            let gone = ["sold", "removed", "deleted", "archive"]
                .iter()
                .any(|w| lower.contains(w));
            if sibling.name != found.name
                && !found.siblings.contains(&sibling.name)
                && shared >= 2
                && shared * 2 >= sibling.fields.len()
                && !gone
            {
                found.siblings.push(sibling.name.clone());
            }
        }
        return Ok(found);
    }
    let Some(root) = nodes.first() else {
        return Err(FeedError::Layout("no XML element found".into()));
    };
    if root.children.is_empty() {
        // `<Inventory/>`: no vehicle today (an empty delta, or an empty snapshot, which the
        // safety guard weighs like any other).
        return Ok(RecordElement {
            name: String::new(),
            siblings: Vec::new(),
        });
    }
    let mut current = root;
    while let [only] = current.children[..] {
        let child = &nodes[only];
        if child.children.is_empty() && child.attributes == 0 {
            break;
        }
        current = child;
    }
    if std::ptr::eq(current, root) {
        return Err(FeedError::Layout(format!(
            "cannot tell which element is one vehicle under <{}>; name it in a profile (record = \"Vehicle\")",
            root.name
        )));
    }
    Ok(RecordElement {
        name: current.name.clone(),
        siblings: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fields = Vec<(String, String)>;

    fn read_all(xml: &str) -> Result<Vec<Fields>, FeedError> {
        let element = detect_record_element(xml.as_bytes())?;
        let mut reader = XmlReader::detected(xml.as_bytes(), element);
        let mut out = Vec::new();
        let mut record = Record::default();
        loop {
            match reader.next(&mut record)? {
                Item::End => return Ok(out),
                Item::Problem(p) => panic!("{p:?}"),
                Item::Record => out.push(
                    record
                        .iter()
                        .map(|(id, v)| (reader.schema().name(id).to_owned(), v.to_owned()))
                        .collect(),
                ),
            }
        }
    }

    fn field<'a>(fields: &'a Fields, name: &str) -> Vec<&'a str> {
        fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// An empty root (a delta feed's day without changes) holds no record; a root with a lone
    /// leaf is still no layout lotsync can guess.
    #[test]
    fn an_empty_root_holds_no_record() {
        for xml in [
            "<Inventory/>",
            "<?xml version=\"1.0\"?>\r\n<Inventory>\r\n</Inventory>\r\n",
        ] {
            assert_eq!(read_all(xml).unwrap(), Vec::<Fields>::new(), "{xml:?}");
        }
        assert!(read_all("<Inventory><Count>0</Count></Inventory>").is_err());
    }

    #[test]
    fn elements_paths_lists_cdata_and_entities() {
        let xml = r#"<?xml version="1.0"?>
<Inventory>
  <Vehicle id="7">
    <VIN>1HGCM82633A004352</VIN>
    <Trim>Sport &amp; Tech &#x2013; AWD</Trim>
    <Prices><Internet>22995</Internet><Retail>23995</Retail></Prices>
    <Photos><Photo>https://i/1.jpg</Photo><Photo>https://i/2.jpg</Photo></Photos>
    <Description><![CDATA[<b>Clean</b> & shiny]]></Description>
    <Empty/>
  </Vehicle>
  <Vehicle><VIN>2</VIN></Vehicle>
</Inventory>"#;
        let records = read_all(xml).unwrap();
        assert_eq!(records.len(), 2);
        let r = &records[0];
        assert_eq!(field(r, "@id"), ["7"]);
        assert_eq!(field(r, "Trim"), ["Sport & Tech – AWD"]);
        assert_eq!(field(r, "Prices/Internet"), ["22995"]);
        assert_eq!(
            field(r, "Photos/Photo"),
            ["https://i/1.jpg", "https://i/2.jpg"]
        );
        assert_eq!(field(r, "Description"), ["<b>Clean</b> & shiny"]);
        assert_eq!(field(&records[1], "VIN"), ["2"]);
    }

    #[test]
    fn elements_told_apart_by_an_attribute_are_fields_of_their_own_too() {
        // One vehicle only: its repeated <Price> elements are not taken for records.
        let xml = r#"<Inventory><Vehicle>
            <VIN>1HGCM82633A004352</VIN>
            <Price type="Internet">22995</Price>
            <Price type="MSRP" currency="USD">25995</Price>
            <Color kind="Exterior">Red</Color>
            <Photo type="exterior">https://i/1.jpg</Photo><Photo type="interior">https://i/2.jpg</Photo>
            <Photo name="3">https://i/3.jpg</Photo>
        </Vehicle></Inventory>"#;
        let records = read_all(xml).unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(field(r, "Price[@type=Internet]"), ["22995"]);
        assert_eq!(field(r, "Price[@type=MSRP]"), ["25995"]);
        assert_eq!(field(r, "Price/@currency"), ["USD"]);
        assert_eq!(field(r, "Color[@kind=Exterior]"), ["Red"]);
        // The plain paths stay as they were: lists of every such element.
        assert_eq!(field(r, "Price"), ["22995", "25995"]);
        assert_eq!(field(r, "Price/@type"), ["Internet", "MSRP"]);
        assert_eq!(
            field(r, "Photo"),
            ["https://i/1.jpg", "https://i/2.jpg", "https://i/3.jpg"]
        );
        assert_eq!(field(r, "Photo[@type=exterior]"), ["https://i/1.jpg"]);
    }

    /// STAR's groups told apart by a code child: a field of their own per code, with the
    /// amount or name as its text; a group its `PriceHideIndicator` hides gives none, and
    /// neither does a group with children of its own.
    #[test]
    fn groups_told_apart_by_a_code_child_are_fields_of_their_own() {
        let xml = r#"<Show><Line>
            <Vehicle><VehicleID>1HGCM82633A004352</VehicleID>
              <ColorGroup><ColorItemCode>Exterior</ColorItemCode><ManufacturerColorCode>GAZ</ManufacturerColorCode><ColorName>Summit White</ColorName></ColorGroup>
              <ColorGroup><ColorItemCode>Interior</ColorItemCode><ColorDescription>Jet Black</ColorDescription></ColorGroup>
            </Vehicle>
            <Pricing><Price><PriceCode>Vehicle Advertised Price</PriceCode><ChargeAmount currencyID="USD">31995.00</ChargeAmount></Price></Pricing>
            <Pricing><PriceHideIndicator>true</PriceHideIndicator><Price><PriceCode>InternetPrice</PriceCode><ChargeAmount>1.00</ChargeAmount></Price></Pricing>
            <Pricing><Price><ChargeAmount>5.00</ChargeAmount><PriceCode>Total Invoice</PriceCode></Price><PriceHideIndicator>1</PriceHideIndicator></Pricing>
            <Engine><Code>V8</Code><Detail><Name>5.3L</Name></Detail></Engine>
        </Line><Line><Vehicle><VehicleID>1HGCM82633A004353</VehicleID></Vehicle></Line></Show>"#;
        let records = read_all(xml).unwrap();
        assert_eq!(records.len(), 2);
        let r = &records[0];
        assert_eq!(
            field(r, "Vehicle/ColorGroup[ColorItemCode=Exterior]"),
            ["Summit White"]
        );
        assert_eq!(
            field(r, "Vehicle/ColorGroup[ColorItemCode=Interior]"),
            ["Jet Black"]
        );
        assert_eq!(
            field(r, "Pricing/Price[PriceCode=Vehicle Advertised Price]"),
            ["31995.00"]
        );
        assert!(field(r, "Pricing/Price[PriceCode=InternetPrice]").is_empty());
        assert!(
            field(r, "Pricing/Price[PriceCode=Total Invoice]").is_empty(),
            "hidden after it"
        );
        assert!(r.iter().all(|(n, _)| !n.starts_with("Engine[")), "{r:?}");
        // The plain paths stay as they were.
        assert_eq!(
            field(r, "Pricing/Price/ChargeAmount"),
            ["31995.00", "1.00", "5.00"]
        );
    }

    /// A standard's record element is taken even for one vehicle (a STAR line item, whose
    /// repeated <Pricing> would otherwise be the shallowest repeat); otherwise, of the
    /// repeating elements, the shallowest that holds one VIN each.
    #[test]
    fn the_record_is_the_element_that_holds_one_vehicle() {
        let star = r#"<ShowVehicleInventory xmlns="http://www.starstandard.org/STAR/5">
            <ApplicationArea><Sender><CreatorNameCode>X</CreatorNameCode></Sender></ApplicationArea>
            <ShowVehicleInventoryDataArea><Show/><VehicleInventory><VehicleInventoryInvoice>
              <VehicleInventoryVehicleLineItem><Vehicle><VehicleID>1HGCM82633A004352</VehicleID></Vehicle>
                <Pricing><Price><PriceCode>Retail</PriceCode></Price></Pricing>
                <Pricing><Price><PriceCode>List</PriceCode></Price></Pricing>
              </VehicleInventoryVehicleLineItem>
            </VehicleInventoryInvoice></VehicleInventory></ShowVehicleInventoryDataArea>
        </ShowVehicleInventory>"#;
        assert_eq!(
            detect_record_element(star.as_bytes()).unwrap().name,
            "VehicleInventoryVehicleLineItem"
        );
        // <Contact> repeats higher up and holds no VIN; <Unit> holds one each.
        let listing = r#"<Feed><Dealer><Contact><Name>A</Name><Phone>1</Phone></Contact>
            <Contact><Name>B</Name><Phone>2</Phone></Contact></Dealer>
            <Units><Group><Unit><Serial>1HGCM82633A004352</Serial><Make>Honda</Make></Unit>
            <Unit><Serial>1HGCM82633A004353</Serial><Make>Honda</Make></Unit></Group></Units></Feed>"#;
        assert_eq!(
            detect_record_element(listing.as_bytes()).unwrap().name,
            "Unit"
        );
    }

    #[test]
    fn attributes_only_records_under_a_wrapper() {
        let xml = r#"<Feed><Units>
            <Unit VIN="A" Make="Ford &amp; Sons"/>
            <Unit VIN="B" Status="Sold"/>
        </Units></Feed>"#;
        let records = read_all(xml).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(field(&records[0], "@Make"), ["Ford & Sons"]);
        assert_eq!(field(&records[1], "@Status"), ["Sold"]);
    }

    #[test]
    fn a_single_record_is_found_through_wrappers() {
        assert_eq!(
            detect_record_element("<Feed><Units><Unit VIN=\"A\"/></Units></Feed>".as_bytes())
                .unwrap(),
            RecordElement {
                name: "Unit".into(),
                siblings: Vec::new(),
            }
        );
        assert_eq!(
            detect_record_element("<Inventory><Vehicle><VIN>A</VIN><Photos><Photo/><Photo/></Photos></Vehicle></Inventory>".as_bytes()).unwrap().name,
            "Vehicle"
        );
    }

    #[test]
    fn siblings_of_detected_records_with_their_fields_are_records_too() {
        let xml = r#"<inventory exported="today">
  <count>3</count>
  <New>
    <trailer><vin>T1</vin><year>2020</year><make>Wabash</make></trailer>
    <truck><vin>A</vin><year>2021</year><make>Mack</make><model>Anthem</model></truck>
    <truck><vin>B</vin><year>2022</year><make>Volvo</make></truck>
    <generated/>
    <dealer><name>X</name><address><city>Y</city></address><vin>none</vin></dealer>
    <SoldTruck><vin>S</vin><year>2019</year><make>Mack</make></SoldTruck>
  </New>
  <Used>
    <trailer><vin>T2</vin><year>2018</year><make>Utility</make></trailer>
  </Used>
</inventory>"#;
        let element = detect_record_element(xml.as_bytes()).unwrap();
        assert_eq!(
            element,
            RecordElement {
                name: "truck".into(),
                siblings: vec!["trailer".into()]
            }
        );
        let mut reader = XmlReader::detected(xml.as_bytes(), element);
        assert_eq!(
            reader.describe(),
            "XML, one record per <truck> or <trailer>"
        );
        let mut record = Record::default();
        let mut vins = Vec::new();
        while let Item::Record = reader.next(&mut record).unwrap() {
            let id = reader.schema().find("vin").unwrap();
            vins.push(record.get(id).unwrap().to_owned());
        }
        // <dealer> shares one field only, and <SoldTruck> is named for a vehicle gone; a
        // <trailer> under another parent is read all the same.
        assert_eq!(vins, ["T1", "A", "B", "T2"]);
        assert!(reader.take_warnings()[0].starts_with("also reading <trailer> as records"));
        // A named record element reads only its own.
        let mut reader = XmlReader::new(xml.as_bytes(), "truck".to_owned());
        let mut n = 0;
        while let Item::Record = reader.next(&mut record).unwrap() {
            n += 1;
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn entity_declarations_and_external_entities_are_refused() {
        let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><lolz><a>&lol2;</a><a/></lolz>"#;
        assert!(matches!(
            read_all(laughs),
            Err(FeedError::Doctype {
                what: "entity declarations",
                ..
            })
        ));
        let xxe = r#"<?xml version="1.0"?><!DOCTYPE foo SYSTEM "file:///etc/passwd"><foo><a>x</a><a/></foo>"#;
        assert!(matches!(
            read_all(xxe),
            Err(FeedError::Doctype {
                what: "an external reference",
                ..
            })
        ));
        let undeclared = "<r><v><a>&nbsp;</a></v><v/></r>";
        let err = read_all(undeclared).unwrap_err();
        assert!(err.to_string().contains("&nbsp;"), "{err}");
    }

    #[test]
    fn depth_and_truncation_are_file_errors() {
        let deep = format!("{}{}", "<a>".repeat(100), "</a>".repeat(100));
        assert!(matches!(
            detect_record_element(deep.as_bytes()),
            Err(FeedError::TooDeep { .. })
        ));
        // Cut in a value, inside a tag, inside an attribute, inside CDATA: all truncated.
        for cut in [
            "<Inventory>\n<Vehicle><VIN>A</VIN></Vehicle>\n<Vehicle><VIN>B",
            "<Inventory>\n<Vehicle><VIN>A</VIN></Vehicle>\n<Vehicle><VIN>B</VI",
            "<Inventory>\n<Vehicle><VIN>A</VIN></Vehicle>\n<Vehicle VIN=\"B",
            "<Inventory>\n<Vehicle><VIN>A</VIN></Vehicle>\n<Vehicle><Notes><![CDATA[x",
        ] {
            let err = read_all(cut).unwrap_err();
            assert!(matches!(err, FeedError::Truncated { line: 3 }), "{err}");
            assert!(err.is_incomplete());
        }
    }

    #[test]
    fn markup_that_is_broken_not_cut_is_an_xml_error() {
        // `<!` followed by neither `--`, `[CDATA[` nor `DOCTYPE`: a syntax error with the
        // rest of the file still there, so not a file cut short.
        let xml = "<Inventory>\n<Vehicle><VIN>A</VIN></Vehicle>\n<!x><Vehicle><VIN>B</VIN></Vehicle>\n</Inventory>";
        let element = "Vehicle".to_owned();
        let mut reader = XmlReader::new(xml.as_bytes(), element);
        let mut record = Record::default();
        assert!(matches!(reader.next(&mut record), Ok(Item::Record)));
        let err = reader.next(&mut record).unwrap_err();
        assert!(matches!(err, FeedError::Xml { line: 3, .. }), "{err}");
        assert!(!err.is_incomplete());
    }
}
