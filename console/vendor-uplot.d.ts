// The types of the module the console imports as ./vendor-uplot.js: uPlot's ES module, which
// routes/console.ts serves from the uplot package. uPlot publishes its own declarations: this
// re-exports them under the name the console imports. Not served (not .js).
import uPlot from 'uplot';

export default uPlot;
