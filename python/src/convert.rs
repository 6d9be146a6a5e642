//! Python values in: fingerprints and ids as integers, single or as arrays,
//! checked with precise exceptions (never a silent wrap or truncation).

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyString};

use crate::errors::{invalid, invalid_type};

/// The id reported by `query_many` for a fingerprint stored without one;
/// refused as an id.
pub const NO_ID: u64 = u64::MAX;

/// A 64-bit unsigned integer argument: a Python `int` (or anything with
/// `__index__`, such as a numpy integer) in `0..2**64`.
pub fn uint64(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = value.py();
    if value.is_instance_of::<PyBool>() {
        return Err(invalid_type(py, format!("{what} must be an int, not bool")));
    }
    if let Ok(v) = value.extract::<u64>() {
        return Ok(v);
    }
    match value.call_method0("__index__") {
        Ok(int) => {
            let shown = int.str().map(|s| s.to_string()).unwrap_or_default();
            // Only fingerprints and ids come from Spark's signed columns.
            let stored = what.starts_with("fingerprint") || what.starts_with("id");
            let hint = if stored && int.lt(0).unwrap_or(false) {
                " (a signed 64-bit value, as Spark stores them, converts with `v & 0xFFFF_FFFF_FFFF_FFFF`)"
            } else {
                ""
            };
            Err(invalid(
                py,
                format!("{what} {shown} is out of range 0..2**64{hint}"),
            ))
        }
        Err(_) => Err(invalid_type(
            py,
            format!(
                "{what} must be an int, not {}",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ),
        )),
    }
}

/// A document id: [`uint64`] but for [`NO_ID`].
pub fn id(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let id = uint64(value, "id")?;
    if id == NO_ID {
        return Err(invalid(
            value.py(),
            "id 2**64-1 is reserved (simstore.NO_ID marks fingerprints stored without an id)",
        ));
    }
    Ok(id)
}

/// A small unsigned integer option (a distance, a count).
pub fn small(value: &Bound<'_, PyAny>, what: &str, max: u64) -> PyResult<u64> {
    let v = uint64(value, what)?;
    if v > max {
        return Err(invalid(value.py(), format!("{what} {v} is above {max}")));
    }
    Ok(v)
}

/// A count of at least one, as an int (`what` names it in errors); one
/// beyond `usize` is taken as `usize::MAX`.
pub fn at_least_one(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    match uint64(value, what)? {
        0 => Err(invalid(value.py(), format!("{what} must be at least 1"))),
        n => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
    }
}

/// Whether a buffer format names unsigned integers (`Q`, or `L`, which
/// the caller checks are 8 bytes) with an explicit or native byte order:
/// `Some(true)` for big-endian, `Some(false)` for little-endian.
fn unsigned_64_order(format: &[u8]) -> Option<bool> {
    let (order, code) = match format {
        [order @ (b'@' | b'=' | b'<' | b'>' | b'!'), code] => (*order, *code),
        [code] => (b'@', *code),
        _ => return None,
    };
    if !matches!(code, b'Q' | b'L') {
        return None;
    }
    Some(match order {
        b'<' => false,
        b'>' | b'!' => true,
        _ => cfg!(target_endian = "big"),
    })
}

/// Turns `values`, read in this machine's byte order from a buffer of
/// `format`, into their values: swapped when the format names the other
/// order.
fn from_buffer_order(values: &mut [u64], format: &[u8]) {
    if unsigned_64_order(format).is_some_and(|big| big != cfg!(target_endian = "big")) {
        for v in values {
            *v = v.swap_bytes();
        }
    }
}

/// A sequence of 64-bit unsigned integers: a buffer of `uint64` (a numpy
/// array of that dtype, `array.array('Q')`, a ctypes array of
/// `c_uint64`, a memoryview), copied; an
/// array-like numpy converts (a pandas Series, an Arrow array), then taken
/// as such a buffer; or any iterable of ints, each checked. Buffers of another element type are
/// refused, not converted: a signed or floating array would otherwise
/// lose or reinterpret values silently.
pub fn uint64s(values: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    let py = values.py();
    if values.is_instance_of::<PyString>() || values.is_instance_of::<PyBytes>() {
        return Err(invalid_type(
            py,
            format!("{what} must be an array or a sequence of ints, not a string"),
        ));
    }
    if let Ok(buffer) = PyBuffer::<u64>::get(values) {
        if buffer.dimensions() != 1 {
            return Err(invalid(
                py,
                format!(
                    "{what} must be one-dimensional, got {} dimensions",
                    buffer.dimensions()
                ),
            ));
        }
        let mut values = buffer.to_vec(py)?;
        // pyo3 takes a big-endian format for a native one on little-endian
        // machines, so that `>u8` arrays are read by their bytes.
        from_buffer_order(&mut values, buffer.format().to_bytes());
        return Ok(values);
    }
    if let Ok(view) = py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((values,))
    {
        let format = view.getattr("format")?.to_string();
        let ndim: usize = view.getattr("ndim")?.extract()?;
        if ndim != 1 {
            return Err(invalid(
                py,
                format!("{what} must be one-dimensional, got {ndim} dimensions"),
            ));
        }
        // ctypes arrays name their byte order (`<Q`), which pyo3 does
        // not take for a `u64` buffer: read such a buffer's bytes here.
        let itemsize: usize = view.getattr("itemsize")?.extract()?;
        if itemsize == 8 && unsigned_64_order(format.as_bytes()).is_some() {
            let bytes = view.call_method0("tobytes")?;
            let mut values: Vec<u64> = bytes
                .cast::<PyBytes>()?
                .as_bytes()
                .chunks_exact(8)
                .map(|c| {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(c);
                    u64::from_ne_bytes(word)
                })
                .collect();
            from_buffer_order(&mut values, format.as_bytes());
            return Ok(values);
        }
        let dtype = values
            .getattr("dtype")
            .map(|d| d.to_string())
            .unwrap_or_else(|_| format!("buffer format {format:?}"));
        return Err(invalid_type(
            py,
            format!(
                "{what} must have dtype uint64, got {dtype} (signed 64-bit fingerprints, \
                 as Spark's LongType holds them, convert with `.view(numpy.uint64)`)"
            ),
        ));
    }
    // Array-likes without the buffer protocol (pandas Series, Arrow
    // arrays): through numpy, then checked as any buffer.
    if values.hasattr("__array__")? {
        let array = py.import("numpy")?.getattr("asarray")?.call1((values,))?;
        if !array.is(values) {
            return uint64s(&array, what);
        }
    }
    let mut out = Vec::with_capacity(values.len().unwrap_or(0));
    let iter = values.try_iter().map_err(|_| {
        invalid_type(
            py,
            format!(
                "{what} must be an array or a sequence of ints, not {}",
                values
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ),
        )
    })?;
    for item in iter {
        out.push(uint64(&item?, what)?);
    }
    Ok(out)
}

/// Document ids as [`uint64s`], none of them [`NO_ID`].
pub fn ids(values: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let ids = uint64s(values, "ids")?;
    if let Some(i) = ids.iter().position(|&id| id == NO_ID) {
        return Err(invalid(
            values.py(),
            format!("ids[{i}] is 2**64-1, which is reserved (simstore.NO_ID)"),
        ));
    }
    Ok(ids)
}

/// Fingerprints and, when given, their ids, of one length.
pub fn entries(
    fingerprints: &Bound<'_, PyAny>,
    ids: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<u64>, Option<Vec<u64>>)> {
    let fps = uint64s(fingerprints, "fingerprints")?;
    let Some(ids) = ids else {
        return Ok((fps, None));
    };
    let ids = self::ids(ids)?;
    if ids.len() != fps.len() {
        return Err(invalid(
            fingerprints.py(),
            format!(
                "{} fingerprints but {} ids: the arrays must be of one length",
                fps.len(),
                ids.len()
            ),
        ));
    }
    Ok((fps, Some(ids)))
}

/// `true` for `int` values, so that a lone fingerprint passed where an
/// array belongs is reported as such.
pub fn is_int(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<PyInt>()
}

/// A volatility (`hash --weights`): 64 bytes (any bytes-like object) or
/// their 128 hexadecimal digits.
pub fn volatility(value: &Bound<'_, PyAny>) -> PyResult<simstore::simhash::Volatility> {
    let py = value.py();
    if let Ok(text) = value.cast::<PyString>() {
        return simstore::simhash::Volatility::from_hex(&text.to_cow()?)
            .map_err(|e| invalid(py, format!("volatility: {e}")));
    }
    let bytes = volatilities(value, 1)?;
    Ok(bytes[0])
}

/// `n` volatilities: a buffer of `n · 64` bytes (a `(n, 64)` uint8 array,
/// `bytes`), row `i` the volatility of query `i`.
pub fn volatilities(
    value: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<Vec<simstore::simhash::Volatility>> {
    let py = value.py();
    let buffer = PyBuffer::<u8>::get(value).map_err(|_| {
        invalid_type(
            py,
            "volatilities must be bytes or a uint8 array of 64 bytes per fingerprint",
        )
    })?;
    let bytes = buffer.to_vec(py)?;
    if bytes.len() != n * 64 {
        return Err(invalid(
            py,
            format!(
                "{} volatility bytes for {n} fingerprints: 64 each are needed",
                bytes.len()
            ),
        ));
    }
    Ok(bytes
        .chunks_exact(64)
        .map(|c| simstore::simhash::Volatility::from_bytes(c.try_into().expect("64 bytes")))
        .collect())
}
