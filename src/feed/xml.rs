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
                    if self.path.is_empty() {
                        self.in_record = false;
                        return Ok(Item::Record);
                    }
                    let text = text.trim();
                    let kind = self.kinds.pop().flatten();
                    if !text.is_empty() {
                        let name = self.path.join("/");
                        let id = self.field_id(&name);
                        record.push(id, text);
                        if let Some(kind) = kind {
                            let id = self.field_id(&kind);
                            record.push(id, text);
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
        let names_a_kind = !value.is_empty()
            && value.len() <= 40
            && value.chars().any(char::is_alphabetic)
            && !value.contains(['/', '[', ']']);
        if names_a_kind {
            return Some(format!("{name}[@{}={value}]", key.as_ref()));
        }
    }
    None
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

/// The record element of a file that does not name one: the shallowest element with fields of
/// its own that repeats under one parent (reading at most `DETECT_BUDGET` bytes); failing that,
/// the element reached
/// from the root through single-child wrappers (`<Feed><Units><Unit/></Units></Feed>`).
pub(super) fn detect_record_element<R: BufRead>(input: R) -> Result<RecordElement, FeedError> {
    struct Node {
        name: String,
        children: Vec<usize>,
        attributes: usize,
        /// Its attributes' and children's names, for telling sibling records.
        fields: Vec<String>,
    }
    let mut reader = quick_xml::Reader::from_reader(Tracked::new(input, DETECT_BUDGET));
    let mut nodes: Vec<Node> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    // (depth, parent node, record element)
    let mut best: Option<(usize, usize, RecordElement)> = None;
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
        let id = nodes.len();
        nodes.push(Node {
            name: name.clone(),
            children: Vec::new(),
            attributes: e.attributes().count(),
            fields: e
                .attributes()
                .flatten()
                .map(|a| a.key.local_name().as_ref().to_owned())
                .collect(),
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
            if repeats && best.as_ref().is_none_or(|(d, _, _)| depth < *d) {
                let found = RecordElement {
                    name,
                    siblings: Vec::new(),
                };
                best = Some((depth, parent, found));
            }
        }
        if !empty {
            open.push(id);
        }
    }
    if let Some((_, parent, mut found)) = best {
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
