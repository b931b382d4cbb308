//! Where zero copy pays: one Fetch-shaped response (a ~100-byte head, the records, a few tail
//! bytes) written to a loopback TCP socket, two ways, for record sizes from 1 KiB to 4 MiB:
//! - `copy`: `pread` the records, copy them into the encoded response, one write (the path a
//!   response takes below `fetch::ZERO_COPY_BYTES_MIN`, and every response before zero copy);
//! - `sendfile`: write the head, `ResponseWriter::send_file_region`, write the tail.
//!
//! A task on the same runtime drains the socket. The file is in the page cache. Each size runs
//! both ways in alternation, `ROUNDS` times, and the median per response is printed; the
//! crossover is where `fetch::ZERO_COPY_BYTES_MIN` belongs.
//!
//! Run: `cargo bench --bench send_file`.

#[cfg(feature = "sim")]
fn main() {}

#[cfg(not(feature = "sim"))]
fn main() {
    real::main();
}

#[cfg(not(feature = "sim"))]
mod real {
    use bytes::{BufMut, BytesMut};
    use samsa::rt::disk::{Disk, File, OpenMode};
    use samsa::rt::net::{self, ResponseWriter, TcpListener, TcpStream};
    use samsa::rt::{task, time};
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    const SIZES_BYTES: [usize; 9] = [
        1 << 10,
        4 << 10,
        8 << 10,
        16 << 10,
        32 << 10,
        64 << 10,
        256 << 10,
        1 << 20,
        4 << 20,
    ];
    /// Bytes sent per size and way in one round (at least `RESPONSES_MIN` responses).
    const ROUND_BYTES: usize = 64 << 20;
    const RESPONSES_MIN: usize = 2_000;
    const ROUNDS: usize = 5;
    const FILE_BYTES: usize = 8 << 20;
    const HEAD_BYTES: usize = 100;
    const TAIL_BYTES: usize = 3;

    async fn copy_one(w: &mut ResponseWriter, file: &File, len: usize) -> std::io::Result<()> {
        let records = file.read_at(0, len).await?;
        let mut out = BytesMut::with_capacity(4 + HEAD_BYTES + len + TAIL_BYTES);
        out.put_bytes(1, 4 + HEAD_BYTES);
        out.put_slice(&records);
        out.put_bytes(2, TAIL_BYTES);
        w.write_all(&out).await
    }

    async fn sendfile_one(w: &mut ResponseWriter, file: &File, len: usize) -> std::io::Result<()> {
        w.write_all(&[1; 4 + HEAD_BYTES]).await?;
        w.send_file_region(file, 0, len).await?;
        w.write_all(&[2; TAIL_BYTES]).await
    }

    /// Microseconds per response for `n` responses of `len` bytes of records.
    async fn run(w: &mut ResponseWriter, file: &File, len: usize, n: usize, zero: bool) -> f64 {
        let start = time::now();
        for _ in 0..n {
            let sent = if zero {
                sendfile_one(w, file, len).await
            } else {
                copy_one(w, file, len).await
            };
            sent.expect("send");
        }
        w.flush().await.expect("flush");
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    pub fn main() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let dir = std::env::temp_dir().join(format!("samsa-send-file-{}", std::process::id()));
            let disk = Disk::real(&dir).expect("disk");
            let file = disk
                .open("records", OpenMode::Truncate)
                .await
                .expect("file");
            let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i * 31 % 251) as u8).collect();
            file.write_at(0, &data).await.expect("write");

            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let drain = task::spawn(async move {
                let (mut socket, _) = listener.accept().await.expect("accept");
                let mut buf = vec![0u8; 1 << 20];
                let mut total = 0u64;
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return total,
                        Ok(n) => total += n as u64,
                    }
                }
            });
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let (_reader, mut writer) = net::split(stream);

            println!("records   copy µs/resp   sendfile µs/resp   copy GB/s   sendfile GB/s");
            for len in SIZES_BYTES {
                let n = (ROUND_BYTES / len).max(RESPONSES_MIN);
                let (mut copy, mut zero) = (Vec::new(), Vec::new());
                // Warm up both paths once.
                run(&mut writer, &file, len, n / 10 + 1, false).await;
                run(&mut writer, &file, len, n / 10 + 1, true).await;
                for _ in 0..ROUNDS {
                    copy.push(run(&mut writer, &file, len, n, false).await);
                    zero.push(run(&mut writer, &file, len, n, true).await);
                }
                let (c, z) = (median(copy), median(zero));
                let gbps = |us: f64| len as f64 / us / 1e3;
                println!(
                    "{:>7} KiB {c:>12.2} {z:>18.2} {:>11.2} {:>15.2}",
                    len >> 10,
                    gbps(c),
                    gbps(z)
                );
            }
            writer.shutdown().await.expect("shutdown");
            drop(writer);
            let _ = time::timeout(Duration::from_secs(5), drain).await;
            let _ = disk.remove("records").await;
            let _ = disk.remove("").await;
        });
    }
}
