//! What the service shows of a vehicle against the payload lotsync sent: the fields that
//! differ ([`field_drift`]). The reconciliation uses it to find fields edited on the service;
//! the first diff of an empty state uses it to tell which vehicles already on the service need
//! nothing sent.

use crate::api::{Price, SpecEnum, Vehicle, VehiclePayload};

/// The fields of the service's vehicle that differ from the payload lotsync last sent, by
/// payload name.
///
/// Only what lotsync sent and the service shows is compared, so that an untouched vehicle is
/// never drift: fields the service does not show (`location_id`, `url`, `fuel`, `body_type`,
/// `tonnage`; `images`, of which it shows one, maybe through its image CDN) and fields it may
/// fill itself (anything lotsync left out, a price key it did not send) are not compared, nor is
/// a field the service leaves out or null. Text is compared with case and runs of blanks
/// ignored, numbers as numbers (`"2021"` is 2021, `"6 Speed"` is 6), options as a set.
pub fn field_drift(service: &Vehicle, sent: &VehiclePayload) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |field: &'static str, differs: bool| {
        if differs {
            out.push(field);
        }
    };
    check("stock", text(Some(&sent.stock), service.stock.as_deref()));
    check("active", flag(sent.active, service.active));
    check("make", text(sent.make.as_deref(), service.make.as_deref()));
    check(
        "model",
        text(sent.model.as_deref(), service.model.as_deref()),
    );
    check("trim", text(sent.trim.as_deref(), service.trim.as_deref()));
    let shown = service.price.as_ref();
    let (selling, internet, msrp) = match &sent.price {
        None => (None, None, None),
        Some(Price::Selling(a)) => (Some(a.0), None, None),
        Some(Price::Detailed(set)) => (
            set.selling.map(|a| a.0),
            set.internet.map(|a| a.0),
            set.msrp.map(|a| a.0),
        ),
    };
    check(
        "price.selling",
        number(selling, shown.and_then(|p| p.selling), 0.005),
    );
    check(
        "price.internet",
        number(internet, shown.and_then(|p| p.internet), 0.005),
    );
    check(
        "price.msrp",
        number(msrp, shown.and_then(|p| p.msrp), 0.005),
    );
    check(
        "miles",
        number(
            sent.miles.map(|m| m as f64),
            service.odometer.as_ref().and_then(|o| o.value),
            0.5,
        ),
    );
    check(
        "type",
        choice(sent.vehicle_type, service.vehicle_type.as_deref()),
    );
    check(
        "year",
        match (sent.year, service.year.as_deref()) {
            (Some(sent), Some(shown)) => match shown.trim().parse::<u16>() {
                Ok(shown) => shown != sent,
                Err(_) => text(Some(&sent.to_string()), Some(shown)),
            },
            _ => false,
        },
    );
    check(
        "body_style",
        choice(sent.body_style, service.body_style.as_deref()),
    );
    check(
        "title_status",
        choice(sent.title_status, service.title_status.as_deref()),
    );
    let exterior = service.exterior.as_ref();
    check(
        "exterior_color",
        choice(
            sent.exterior_color,
            exterior.and_then(|e| e.color.as_deref()),
        ),
    );
    let interior = service.interior.as_ref();
    check(
        "interior_color",
        choice(
            sent.interior_color,
            interior.and_then(|i| i.color.as_deref()),
        ),
    );
    check(
        "interior_type",
        choice(
            sent.interior_type,
            interior.and_then(|i| i.interior_type.as_deref()),
        ),
    );
    let transmission = service.transmission.as_ref();
    check(
        "transmission_type",
        choice(
            sent.transmission_type,
            transmission.and_then(|t| t.transmission_type.as_deref()),
        ),
    );
    check(
        "transmission_speed",
        number(
            sent.transmission_speed
                .and_then(|s| leading_number(s.as_str())),
            transmission.and_then(|t| t.speed),
            0.5,
        ),
    );
    check(
        "drive_type",
        choice(sent.drive_type, service.drivetrain.as_deref()),
    );
    check("lifted", flag(sent.lifted, service.lifted));
    check("lowered", flag(sent.lowered, service.lowered));
    check(
        "doors",
        number(sent.doors.map(f64::from), service.doors, 0.5),
    );
    check(
        "seats",
        number(sent.seats.map(f64::from), service.seats, 0.5),
    );
    let engine = service.engine.as_ref();
    check(
        "engine_displacement",
        number(
            sent.engine_displacement,
            engine.and_then(|e| e.displacement),
            0.05,
        ),
    );
    check(
        "engine_cylinders",
        number(
            sent.engine_cylinders.map(f64::from),
            engine.and_then(|e| e.cylinders),
            0.5,
        ),
    );
    check(
        "options",
        !sent.options.is_empty()
            && !service.options.is_empty()
            && option_set(&sent.options) != option_set(&service.options),
    );
    out
}

/// Free text: both present and different once case and runs of blanks are ignored.
fn text(sent: Option<&str>, shown: Option<&str>) -> bool {
    match (sent, shown) {
        (Some(sent), Some(shown)) => normalized(sent) != normalized(shown),
        _ => false,
    }
}

fn choice<T: SpecEnum>(sent: Option<T>, shown: Option<&str>) -> bool {
    text(sent.map(|s| s.to_string()).as_deref(), shown)
}

fn number(sent: Option<f64>, shown: Option<f64>, tolerance: f64) -> bool {
    match (sent, shown) {
        (Some(sent), Some(shown)) => (sent - shown).abs() > tolerance,
        _ => false,
    }
}

fn flag(sent: Option<bool>, shown: Option<bool>) -> bool {
    matches!((sent, shown), (Some(a), Some(b)) if a != b)
}

fn normalized(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn option_set(options: &[String]) -> Vec<String> {
    let mut set: Vec<String> = options
        .iter()
        .map(|o| normalized(o))
        .filter(|o| !o.is_empty())
        .collect();
    set.sort();
    set.dedup();
    set
}

/// `6 Speed` → 6.
fn leading_number(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        Amount, ApiClient, ApiToken, BodyStyle, BodyType, ClientSettings, Color, DriveType, Fuel,
        InteriorType, PriceSet, TitleStatus, Tonnage, TransmissionSpeed, TransmissionType,
        VehicleType,
    };
    use serde_json::json;

    /// Every §4.2 field set.
    fn full_payload(vin: &str) -> VehiclePayload {
        let mut p = VehiclePayload::new(10, "U1001", vin);
        p.active = Some(true);
        p.make = Some("Ford".into());
        p.model = Some("F-150".into());
        p.trim = Some("XLT".into());
        p.price = Some(Price::Detailed(PriceSet {
            selling: Some(Amount(41995.0)),
            internet: Some(Amount(40995.5)),
            msrp: Some(Amount(45000.0)),
        }));
        p.miles = Some(34812);
        p.vehicle_type = Some(VehicleType::Used);
        p.year = Some(2021);
        p.url = Some("https://dealer.example.com/u1001".into());
        p.body_style = Some(BodyStyle::Truck);
        p.body_type = Some(BodyType::Tbd);
        p.fuel = Some(Fuel::Gas);
        p.exterior_color = Some(Color::White);
        p.interior_color = Some(Color::Black);
        p.interior_type = Some(InteriorType::Leather);
        p.title_status = Some(TitleStatus::Clear);
        p.tonnage = Some(Tonnage::HalfTon);
        p.transmission_type = Some(TransmissionType::Automatic);
        p.transmission_speed = Some(TransmissionSpeed::Six);
        p.drive_type = Some(DriveType::FourByFour);
        p.lifted = Some(false);
        p.lowered = Some(false);
        p.doors = Some(4);
        p.seats = Some(5);
        p.engine_displacement = Some(3.5);
        p.engine_cylinders = Some(6);
        p.options = vec!["Tow Package".into(), "Heated Seats".into()];
        p.images = vec!["https://img.example.com/1.jpg".into()];
        p
    }

    /// An untouched vehicle, as the sandbox (the strict imitation of the service) shows it
    /// after lotsync sent it, is no drift: whatever it fills, converts or leaves out.
    #[cfg(feature = "sandbox")]
    #[tokio::test]
    async fn an_untouched_vehicle_on_the_sandbox_is_not_drift() {
        let sb = crate::sandbox::RunningSandbox::on_loopback(Default::default())
            .await
            .expect("sandbox starts");
        let settings = ClientSettings::new(sb.base_url(), 100, ApiToken::new("sandbox-token"));
        let client = ApiClient::new(settings).expect("client");
        let full = full_payload("1FTFW1E59MFA10001");
        let mut bare = VehiclePayload::new(10, "S2", "1HGCV1F36LA020002");
        bare.price = Some(Price::Selling(Amount(24750.0)));
        bare.options = vec!["B".into(), "A".into()];
        for p in [&full, &bare] {
            client.upsert_vehicle(p).await.expect("accepted");
        }
        let listed = client.list_vehicles().await.expect("listed").value;
        assert_eq!(listed.len(), 2);
        for (v, p) in listed.iter().zip([&full, &bare]) {
            assert_eq!(field_drift(v, p), Vec::<&str>::new(), "{v:#?}");
        }
        // What someone could edit on the service is seen.
        let mut edited = listed[0].clone();
        edited.price.as_mut().unwrap().selling = Some(39995.0);
        edited.make = Some("Chevrolet".into());
        edited.transmission.as_mut().unwrap().speed = Some(7.0);
        edited.options = vec!["Tow Package".into()];
        assert_eq!(
            field_drift(&edited, &full),
            ["make", "price.selling", "transmission_speed", "options"]
        );
    }

    #[test]
    fn drift_ignores_case_blanks_number_forms_and_what_is_not_shown() {
        let p = full_payload("1FTFW1E59MFA10001");
        let v: Vehicle = serde_json::from_value(json!({
            "id": 1, "stock": " u1001 ", "make": "FORD", "model": "f-150", "trim": "XLT  ",
            "price": {"selling": "41995.00", "internet": 40995.5, "retail": 1},
            "year": 2021, "type": "used", "transmission": {"speed": "6 Speed"},
            "options": ["heated seats", "Tow Package", "Tow Package"],
            "engine": {"displacement": "3.5L", "cylinders": 6}, "doors": 4.0,
            "body_style": null, "exterior": "White", "image": "https://cdn.example.com/x.jpg"
        }))
        .unwrap();
        assert_eq!(field_drift(&v, &p), Vec::<&str>::new());
        // A price key lotsync did not send, a field it left out: the service's to fill.
        let mut sent = VehiclePayload::new(10, "U1001", "1FTFW1E59MFA10001");
        sent.price = Some(Price::Selling(Amount(41995.0)));
        assert_eq!(field_drift(&v, &sent), Vec::<&str>::new());
        let v: Vehicle = serde_json::from_value(json!({
            "id": 1, "stock": "U1002", "year": "2020", "price": 41000, "active": false,
            "odometer": {"value": 35000}, "lifted": true
        }))
        .unwrap();
        assert_eq!(
            field_drift(&v, &p),
            [
                "stock",
                "active",
                "price.selling",
                "miles",
                "year",
                "lifted"
            ]
        );
    }
}
