//! Figures the report shows without judging them: fragmentation (a
//! before/after table shows "fragmentation 12.3 → 3.1 %"), which no
//! criterion limits. The recorder keeps the unusable free space index of
//! every page order (`memstat` rows `fragmentation.ORDER`, 0–1, from
//! `/proc/buddyinfo`: the share of free memory in blocks too small for an
//! allocation of that order); the JSON's `"measurements"` array has one
//! entry per recorded order: its mean, highest and last value in percent
//! over the window. `report --compare` compares the means.

use super::query::Data;
use serde_json::{json, Value};

/// One entry per recorded order, lowest order first.
pub(crate) fn json(d: &Data) -> Vec<Value> {
    let mut orders: Vec<(u32, &Vec<super::verdict::Point>)> = d
        .fragmentation
        .iter()
        .filter_map(|(name, pts)| {
            let order = name.strip_prefix("fragmentation.")?.parse().ok()?;
            Some((order, pts))
        })
        .collect();
    orders.sort_by_key(|o| o.0);
    orders
        .into_iter()
        .filter_map(|(order, pts)| {
            let vals: Vec<f64> = pts
                .iter()
                .map(|p| p.v * 100.0)
                .filter(|v| v.is_finite())
                .collect();
            let last = *vals.last()?;
            let mean = vals.iter().sum::<f64>() / vals.len() as f64;
            let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Some(json!({
                "id": "fragmentation",
                "subject": format!("order {order}"),
                "unit": "percent",
                "samples": vals.len(),
                "mean": mean,
                "max": max,
                "last": last,
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::report::verdict::Point;

    #[test]
    fn one_entry_per_order_in_percent_and_none_without_data() {
        let mut d = Data::default();
        assert!(json(&d).is_empty());
        let pts = |v: &[f64]| -> Vec<Point> {
            v.iter()
                .enumerate()
                .map(|(i, v)| Point {
                    ts: i as f64,
                    v: *v,
                })
                .collect()
        };
        d.fragmentation
            .insert("fragmentation.10".into(), pts(&[0.5, 0.7]));
        d.fragmentation
            .insert("fragmentation.2".into(), pts(&[0.1, 0.2, 0.3]));
        d.fragmentation
            .insert("fragmentation.x".into(), pts(&[1.0]));
        let j = json(&d);
        assert_eq!(j.len(), 2);
        assert_eq!(j[0]["subject"], "order 2");
        assert!((j[0]["mean"].as_f64().unwrap() - 20.0).abs() < 1e-9);
        assert!((j[0]["max"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(j[1]["subject"], "order 10");
        assert!((j[1]["last"].as_f64().unwrap() - 70.0).abs() < 1e-9);
    }
}
