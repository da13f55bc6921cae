import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** A bar chart of one figure over time, sized to its box (whose height the stylesheet fixes). */
export interface BarChart {
  /** `times` in unix seconds, one value per time; the y axis names `unit`. */
  show(times: number[], values: number[]): void;
}

const HEIGHT = 220; // px, the .plot box's height in style.css: the chart never moves the page when drawn

export function barChart(box: HTMLElement, unit: string, color: string): BarChart {
  const width = (): number => Math.max(200, box.clientWidth);
  const plot = new uPlot(
    {
      width: width(),
      height: HEIGHT,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.1] } },
      // Whole steps on the y axis: requests and RU are counts.
      axes: [
        {},
        {
          label: unit,
          size: 60,
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8, 1e9],
        },
      ],
      series: [
        {},
        {
          label: unit,
          stroke: color,
          fill: `${color}99`,
          width: 1,
          paths: uPlot.paths.bars?.({ size: [0.7, 60] }),
          points: { show: false },
        },
      ],
    },
    [[], []],
    box,
  );
  new ResizeObserver(() => plot.setSize({ width: width(), height: HEIGHT })).observe(box);
  return {
    show(times, values) {
      plot.setData([times, values]);
    },
  };
}
