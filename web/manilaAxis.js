// The chart's time axis in Manila time (UTC+08:00, no daylight saving), whatever the browser's
// own zone. uPlot builds its ticks from Dates in the browser's zone: where that zone skips an hour
// (a daylight-saving change), Manila's midnight or 2 am fell in the gap, and a tick moved an hour
// and took the wrong label. Here every tick is an instant computed from UTC plus eight hours.
// Times are in seconds, as uPlot gives them.

const MANILA_S = 8 * 3600;
const DAY_S = 86_400;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Manila's wall clock at `s` (read with getUTC*). */
const wall = (s) => new Date((s + MANILA_S) * 1000);

/**
 * Ticks from `min` to `max` every `incr` seconds (uPlot's choice for the space): on Manila's hours,
 * or its midnights from the first in the window, for steps up to four weeks; on the first of its
 * months beyond (every one, two, three, four or six), on the first of its years from a year.
 */
export function manilaSplits(min, max, incr) {
  const ticks = [];
  if (incr >= 28 * DAY_S) {
    const months = incr >= 365 * DAY_S ? 12 * Math.max(1, Math.round(incr / (365 * DAY_S))) : Math.max(1, Math.round(incr / (30 * DAY_S)));
    const first = wall(min);
    let year = first.getUTCFullYear();
    let month = Math.floor(first.getUTCMonth() / months) * months;
    if (months >= 12) {
      year = Math.floor(year / (months / 12)) * (months / 12);
      month = 0;
    }
    for (;;) {
      const t = Date.UTC(year, month, 1) / 1000 - MANILA_S;
      if (t > max) break;
      if (t >= min) ticks.push(t);
      month += months;
    }
    return ticks;
  }
  // Hours on multiples of the step within Manila's day; days every step from the first midnight.
  const first = incr >= DAY_S ? Math.ceil((min + MANILA_S) / DAY_S) * DAY_S - MANILA_S : Math.ceil((min + MANILA_S) / incr) * incr - MANILA_S;
  for (let t = first; t <= max; t += incr) ticks.push(t);
  return ticks;
}

/** The ticks' labels in Manila time: hours (with minutes, and seconds under a minute's step; the date at midnight), days (with the year on 1 January), months (with the year in January), years. The first tick names its date or year too. */
export function manilaValues(ticks, incr) {
  return ticks.map((s, i) => {
    const d = wall(s);
    const year = String(d.getUTCFullYear());
    const date = `${d.getUTCMonth() + 1}/${d.getUTCDate()}`;
    if (incr >= 365 * DAY_S) return year;
    if (incr >= 28 * DAY_S) return d.getUTCMonth() === 0 || i === 0 ? `${MONTHS[d.getUTCMonth()]}\n${year}` : MONTHS[d.getUTCMonth()];
    if (incr >= DAY_S) return (d.getUTCMonth() === 0 && d.getUTCDate() === 1) || i === 0 ? `${date}\n${year}` : date;
    const h = d.getUTCHours();
    const m = d.getUTCMinutes();
    const sec = d.getUTCSeconds();
    // Seconds where the step is under a minute (a minute's window, dragged on the chart).
    // Under a minute's step, a tick within a minute shows its seconds alone (`:10`), so the
    // labels of a minute's window do not run into each other.
    if (incr < 60 && sec !== 0 && i !== 0) return `:${String(sec).padStart(2, '0')}`;
    const clock = incr < 60 ? `:${String(m).padStart(2, '0')}:${String(sec).padStart(2, '0')}` : m ? `:${String(m).padStart(2, '0')}` : '';
    const time = `${h % 12 || 12}${clock}${h < 12 ? 'am' : 'pm'}`;
    return (h === 0 && m === 0) || i === 0 ? `${time}\n${date}` : time;
  });
}
