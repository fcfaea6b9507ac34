// A heavier TUI frame: the whole screen (40 lines of 100 columns) rebuilt as a string and
// diffed against the last frame, ~12 times a second, with a stalled HTTP stream open.
const net = require('net'); const http = require('http');
const srv = net.createServer(s => { s.on('data', () => {}); }).listen(0, '127.0.0.1', () => {
  const req = http.request({host: '127.0.0.1', port: srv.address().port, method: 'POST', path: '/v1/messages'}, r => {});
  req.on('error', () => {}); req.write('{"stream":true}'); req.end();
  const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'; let i = 0; const t0 = Date.now(); let last = [];
  const history = Array.from({length: 40}, (_, n) => `line ${n} `.repeat(12).slice(0, 100));
  setInterval(() => {
    const lines = history.map(l => l.split('').map(c => c).join(''));
    lines.push(`${frames[i++ % 10]} Thinking... (esc to cancel, ${Math.floor((Date.now()-t0)/1000)}s)`);
    let out = '';
    lines.forEach((l, n) => { if (last[n] !== l) out += `\x1b[${n+1};1H\x1b[2K${l}`; });
    last = lines; process.stdout.write(out);
  }, 80);
});
