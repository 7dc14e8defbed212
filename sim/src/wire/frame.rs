//! Size-prefixed frames, as Kafka sends them: a 4-byte big-endian length,
//! then that many bytes.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Kafka's `socket.request.max.bytes` default: 100 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 * 1024 * 1024;

/// The smallest request: an API key, a version and a correlation id.
const MIN_REQUEST_BYTES: usize = 8;

/// Why no frame was read. Each closes the connection, as Kafka does.
#[derive(Debug)]
pub enum FrameError {
    /// The peer closed the connection between frames, or reset it there
    /// (as librdkafka closes its sockets).
    Closed,
    /// A size below a request header, negative, or above the limit.
    BadSize(i64),
    /// The connection broke, or closed inside a frame.
    Io(std::io::Error),
}

/// The first four bytes of an HTTP/1 request, by its method.
const HTTP_METHODS: [&[u8; 4]; 8] = [
    b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN",
];

impl FrameError {
    /// What a peer that sent a size out of bounds most likely speaks
    /// instead of Kafka's protocol, read off the four bytes taken for the
    /// size: a TLS record (a client configured for SSL on this plaintext
    /// listener) or an HTTP request. `None` for anything else.
    pub fn foreign_protocol(&self) -> Option<&'static str> {
        let FrameError::BadSize(size) = *self else {
            return None;
        };
        let bytes = i32::try_from(size).ok()?.to_be_bytes();
        match bytes {
            // A TLS record of type handshake, version 3.x: a ClientHello.
            [0x16, 0x03, ..] => {
                Some("TLS (a client configured for SSL; this listener is plaintext)")
            }
            _ if HTTP_METHODS.contains(&&bytes) => Some("HTTP"),
            _ => None,
        }
    }
}

/// Reads one frame of at most `max` bytes. The buffer grows as the bytes
/// arrive rather than by the announced size, so a peer that announces a
/// large frame and sends little holds little memory.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Bytes, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut size[got..]).await {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if got == 0 && e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(FrameError::Closed)
            }
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let announced = i32::from_be_bytes(size);
    let len = usize::try_from(announced)
        .ok()
        .filter(|&n| (MIN_REQUEST_BYTES..=max).contains(&n))
        .ok_or(FrameError::BadSize(i64::from(announced)))?;
    let mut body = BytesMut::with_capacity(len.min(64 * 1024));
    let mut limited = reader.take(len as u64);
    while body.len() < len {
        match limited.read_buf(&mut body).await {
            Ok(0) => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(body.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max: usize) -> Result<Bytes, FrameError> {
        let mut r = bytes;
        read_frame(&mut r, max).await
    }

    #[tokio::test]
    async fn frames_are_bounded_and_truncation_is_an_error() {
        let mut ok = 8i32.to_be_bytes().to_vec();
        ok.extend_from_slice(&[1; 8]);
        assert_eq!(&read(&ok, 100).await.unwrap()[..], &[1; 8]);
        assert!(matches!(read(&[], 100).await, Err(FrameError::Closed)));
        assert!(matches!(read(&ok[..6], 100).await, Err(FrameError::Io(_))));
        assert!(matches!(read(&ok[..2], 100).await, Err(FrameError::Io(_))));
        let huge = i32::MAX.to_be_bytes();
        assert!(matches!(
            read(&huge, 100).await,
            Err(FrameError::BadSize(_))
        ));
        let negative = (-1i32).to_be_bytes();
        assert!(matches!(
            read(&negative, 100).await,
            Err(FrameError::BadSize(-1))
        ));
        let tiny = 3i32.to_be_bytes();
        assert!(matches!(
            read(&tiny, 100).await,
            Err(FrameError::BadSize(3))
        ));
        assert!(matches!(read(&ok, 7).await, Err(FrameError::BadSize(8))));
    }

    #[tokio::test]
    async fn tls_and_http_peers_are_named() {
        // The first bytes of a TLS 1.2/1.3 ClientHello record, as
        // librdkafka sends them with `security.protocol=SSL`.
        let tls = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        let err = read(&tls, DEFAULT_MAX_REQUEST_BYTES).await.unwrap_err();
        assert!(err.foreign_protocol().unwrap().starts_with("TLS"));
        for http in [&b"GET / HTTP/1.1\r\n"[..], b"POST /x HTTP/1.1\r\n"] {
            let err = read(http, DEFAULT_MAX_REQUEST_BYTES).await.unwrap_err();
            assert_eq!(err.foreign_protocol(), Some("HTTP"));
        }
        // A frame merely too large, or a bad size of no known protocol.
        let big = (DEFAULT_MAX_REQUEST_BYTES as i32 + 1).to_be_bytes();
        let err = read(&big, DEFAULT_MAX_REQUEST_BYTES).await.unwrap_err();
        assert_eq!(err.foreign_protocol(), None);
        let err = read(&(-1i32).to_be_bytes(), 100).await.unwrap_err();
        assert_eq!(err.foreign_protocol(), None);
        // With a limit that admits it, a TLS-looking size is just a size.
        let mut r = &tls[..];
        assert!(matches!(
            read_frame(&mut r, 1 << 30).await,
            Err(FrameError::Io(_))
        ));
    }

    /// Yields `first`, then fails with a reset.
    struct ThenReset(&'static [u8]);

    impl AsyncRead for ThenReset {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if self.0.is_empty() {
                return std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()));
            }
            let n = self.0.len().min(buf.remaining());
            buf.put_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_reset_between_frames_is_a_close_and_inside_one_an_error() {
        let r = read_frame(&mut ThenReset(&[]), 100).await;
        assert!(matches!(r, Err(FrameError::Closed)));
        let r = read_frame(&mut ThenReset(&[0, 0]), 100).await;
        assert!(matches!(r, Err(FrameError::Io(_))));
        let r = read_frame(&mut ThenReset(&[0, 0, 0, 8, 1]), 100).await;
        assert!(matches!(r, Err(FrameError::Io(_))));
    }
}
