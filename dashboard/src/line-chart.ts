import uPlot from 'uplot';

/** A line chart of a few figures over time (latency percentiles, a success rate), sized to its box. */
export interface LineChart {
  /** `times` in unix seconds; one list of values per line, null where a period has no value (a gap). */
  show(times: number[], lines: Array<Array<number | null>>): void;
}

const HEIGHT = 220; // px, the .plot box's height in style.css, as the bar charts'

export interface LineChartOptions {
  /** The y axis's label. */
  unit: string;
  lines: ReadonlyArray<{ label: string; color: string }>;
  /** A fixed y range (a rate's 0 to 1); else from 0 to a little above the highest value. */
  range?: [number, number];
  /** How the y axis writes a value. */
  format?: (v: number) => string;
}

export function lineChart(box: HTMLElement, options: LineChartOptions): LineChart {
  const width = (): number => Math.max(200, box.clientWidth);
  const fixed = options.range;
  const format = options.format;
  const plot = new uPlot(
    {
      width: width(),
      height: HEIGHT,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (_u, _min, max) => fixed ?? [0, Math.max(1, max) * 1.1] } },
      axes: [{}, { label: options.unit, size: 60, ...(format === undefined ? {} : { values: (_u, ticks) => ticks.map(format) }) }],
      series: [
        {},
        ...options.lines.map((l) => ({ label: l.label, stroke: l.color, width: 2, spanGaps: false, points: { show: true, size: 4 } })),
      ],
    },
    [[], ...options.lines.map(() => [])],
    box,
  );
  new ResizeObserver(() => plot.setSize({ width: width(), height: HEIGHT })).observe(box);
  return {
    show(times, lines) {
      plot.setData([times, ...lines] as uPlot.AlignedData);
    },
  };
}
