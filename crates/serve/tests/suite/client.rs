//! A small blocking HTTP/1.1 client over raw sockets, so that tests can send exactly the bytes
//! a hostile client would (malformed bodies, lying headers) and read chunked SSE streams.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::KEY;

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }

    /// The `data:` payloads of an SSE body, in order.
    pub fn sse_data(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    /// The error shape every failure has: `{"error": {"message", "type", "code"}}`.
    pub fn error_type(&self) -> String {
        let v = self.json();
        assert_eq!(v["error"]["code"], self.status, "{v}");
        assert!(v["error"]["message"].is_string(), "{v}");
        v["error"]["type"].as_str().unwrap().to_string()
    }
}

/// Sends `raw` (a whole request) and reads the response to the end.
pub fn send_raw(addr: SocketAddr, raw: &[u8]) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(raw).unwrap();
    read_response(&mut BufReader::new(s))
}

/// A request with `Connection: close`, the test key unless `headers` has an Authorization.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    send_raw(addr, build(method, path, headers, body).as_bytes())
}

pub fn build(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
    {
        raw += &format!("Authorization: Bearer {KEY}\r\n");
    }
    for (n, v) in headers {
        raw += &format!("{n}: {v}\r\n");
    }
    if !body.is_empty() || method == "POST" {
        raw += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    raw + "\r\n" + body
}

pub fn post(addr: SocketAddr, path: &str, body: &str) -> Response {
    request(addr, "POST", path, &[], body)
}

pub fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, &[], "")
}

pub fn read_response(r: &mut impl BufRead) -> Response {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    let get = |n: &str| {
        headers
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(n) = get("content-length") {
        body.resize(n.parse().unwrap(), 0);
        r.read_exact(&mut body).unwrap();
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Response {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

/// Waits until `/health` says ok (the model has loaded).
pub fn wait_healthy(addr: SocketAddr) {
    for _ in 0..600 {
        if get(addr, "/health").status == 200 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server did not become healthy");
}
