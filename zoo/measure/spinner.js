// An agent-like TUI waiting on a stalled model stream: a spinner with an elapsed counter redrawn
// ~12 times a second, and one HTTP request to a server that accepts and never answers.
const net = require('net'); const http = require('http');
const srv = net.createServer(s => { s.on('data', () => {}); }).listen(0, '127.0.0.1', () => {
  const req = http.request({host: '127.0.0.1', port: srv.address().port, method: 'POST', path: '/v1/messages'}, r => {});
  req.on('error', () => {}); req.write(JSON.stringify({model: 'x', stream: true, messages: [{role: 'user', content: 'hi'}]})); req.end();
  const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'; let i = 0; const t0 = Date.now();
  setInterval(() => { process.stdout.write(`\r\x1b[2K\x1b[36m${frames[i++ % 10]}\x1b[0m Thinking... (esc to cancel, ${Math.floor((Date.now()-t0)/1000)}s)`); }, 80);
});
