//! Reading Python arguments into core values, with errors that name the argument.

use memcommit_core::{Query, Status, Tier};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PyString};

use crate::errors::{InvalidType, InvalidValue};

pub fn type_error(field: &str, want: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let name = got.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    InvalidType::new_err(format!("{field} must be {want}, not {name}"))
}

/// The items of `obj` as a new list, which a call keeps (later changes to `obj` change
/// nothing it holds): a list is copied in one call, any other iterable read item by item.
/// `not_iterable` makes the error for an object that cannot be iterated from Python's.
pub fn items_of<'py>(
    obj: &Bound<'py, PyAny>,
    not_iterable: impl FnOnce(PyErr) -> PyErr,
) -> PyResult<Bound<'py, PyList>> {
    // Exactly a list: a subclass may iterate otherwise than its items.
    if let Ok(list) = obj.cast_exact::<PyList>() {
        return Ok(list.get_slice(0, list.len()));
    }
    let items = obj.try_iter().map_err(not_iterable)?.collect::<PyResult<Vec<_>>>()?;
    PyList::new(obj.py(), items)
}

pub fn get_str(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    crate::commit::text_str(obj, field).map(str::to_owned)
}

pub fn get_opt_str(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Option<String>> {
    if obj.is_none() {
        Ok(None)
    } else {
        get_str(obj, field).map(Some)
    }
}

pub fn get_strs(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<String>> {
    if obj.is_instance_of::<PyString>() {
        return Err(InvalidType::new_err(format!(
            "{field} must be a sequence of str, not a single str (wrap it in a tuple)"
        )));
    }
    // Bytes iterate as ints, a mapping as its keys alone: neither is meant as strs.
    if obj.is_instance_of::<pyo3::types::PyBytes>()
        || obj.is_instance_of::<pyo3::types::PyByteArray>()
        || obj.is_instance_of::<pyo3::types::PyDict>()
    {
        return Err(type_error(field, "a sequence of str", obj));
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| type_error(field, "a sequence of str", obj))? {
        out.push(get_str(&item?, field)?);
    }
    Ok(out)
}

pub fn get_tier(obj: &Bound<'_, PyAny>) -> PyResult<Tier> {
    tier_from(crate::commit::text_str(obj, "tier")?)
}

pub fn tier_from(s: &str) -> PyResult<Tier> {
    Tier::parse(s).ok_or_else(|| {
        InvalidValue::new_err(format!("tier: {s:?} is not a tier; use one of working, mid, long, archive"))
    })
}

pub fn status_from(s: &str) -> PyResult<Status> {
    Status::parse(s)
        .ok_or_else(|| InvalidValue::new_err(format!("status: {s:?} is not a status; use active or stale")))
}

pub fn get_status(obj: &Bound<'_, PyAny>) -> PyResult<Status> {
    status_from(crate::commit::text_str(obj, "status")?)
}

/// The value of an int argument for a message: itself, or its size when it is too long to show.
fn show_int(obj: &Bound<'_, PyAny>) -> String {
    let bits = obj.call_method0("bit_length").and_then(|b| b.extract::<u64>()).unwrap_or(u64::MAX);
    match obj.str() {
        Ok(s) if bits <= 256 => s.to_string(),
        _ => format!("an int of {bits} bits"),
    }
}

/// Read an int argument that must lie in `0..=u64::MAX` (an LSN, a count): `TypeError` for
/// anything but an int (a bool included), `ValueError`, naming `field`, for one out of range.
/// (`memcommit.commit.check_u64` is the same check for the arguments Python reads.)
fn u64_arg(obj: &Bound<'_, PyAny>, field: &str, want: &str) -> PyResult<u64> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(type_error(field, want, obj));
    }
    if obj.lt(0)? {
        return Err(InvalidValue::new_err(format!("{field}: must not be negative, got {}", show_int(obj))));
    }
    obj.extract::<u64>().map_err(|_| {
        InvalidValue::new_err(format!(
            "{field}: must be at most {} (2**64 - 1), got {}",
            u64::MAX,
            show_int(obj)
        ))
    })
}

/// An int argument in `0..=u64::MAX`, or None (see `u64_arg`).
pub fn get_opt_u64(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<u64>> {
    match obj {
        Some(o) if !o.is_none() => u64_arg(o, field, "an int or None").map(Some),
        _ => Ok(None),
    }
}

/// A vector argument: a sequence of numbers (a list, a tuple, an array), read as f32. Its
/// length and values are the core's to check (`Log::validate`). A str or bytes is refused.
pub fn get_vector(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<std::sync::Arc<[f32]>> {
    let want = "a sequence of numbers";
    // Iterating a mapping gives its keys, and a set has no order: neither is a vector.
    if obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<pyo3::types::PyBytes>()
        || obj.is_instance_of::<pyo3::types::PyDict>()
        || obj.is_instance_of::<pyo3::types::PySet>()
        || obj.is_instance_of::<pyo3::types::PyFrozenSet>()
    {
        return Err(type_error(field, want, obj));
    }
    let items = items_of(obj, |_| type_error(field, want, obj))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if item.is_instance_of::<PyBool>() {
            return Err(type_error(&format!("{field}[{i}]"), "a number", &item));
        }
        let x: f64 = match item.extract() {
            Ok(x) => x,
            // An int past any float's reach is a number, just too large.
            Err(_) if item.is_instance_of::<PyInt>() => {
                return Err(InvalidValue::new_err(format!(
                    "{field}[{i}]: {} is too large for a 32-bit float (vectors are stored as 32-bit \
                     floats, which reach about 3.4e38)",
                    item.repr().map_or_else(|_| "the int".to_string(), |r| r.to_string())
                )));
            }
            Err(_) => return Err(type_error(&format!("{field}[{i}]"), "a number", &item)),
        };
        out.push(x as f32);
    }
    Ok(out.into())
}

/// The filters of `find` and `search` (tier, kind, task, status, tags), read from Python into
/// values the query borrows.
pub struct Filters {
    tier: Option<Tier>,
    status: Option<Status>,
    kind: Option<String>,
    task: Option<String>,
    tags: Option<Vec<String>>,
}

impl Filters {
    /// Read the filters; None (or left out) matches anything.
    pub fn read(
        tier: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        status: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Filters> {
        Ok(Filters {
            tier: tier.filter(|t| !t.is_none()).map(get_tier).transpose()?,
            status: status.filter(|s| !s.is_none()).map(get_status).transpose()?,
            kind: kind.map(|k| get_opt_str(k, "kind")).transpose()?.flatten(),
            task: task.map(|t| get_opt_str(t, "task")).transpose()?.flatten(),
            tags: tags.filter(|t| !t.is_none()).map(|t| get_strs(t, "tags")).transpose()?,
        })
    }

    /// The core's query of these filters, with a limit.
    pub fn query(&self, limit: Option<usize>) -> Query<'_> {
        Query {
            tier: self.tier,
            kind: self.kind.as_deref(),
            task: self.task.as_deref(),
            status: self.status,
            tags: self.tags.as_deref(),
            limit,
        }
    }
}
